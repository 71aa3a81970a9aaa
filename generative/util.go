package generative

import (
	"runtime"
)

func maxProcs() int { return runtime.GOMAXPROCS(0) }
