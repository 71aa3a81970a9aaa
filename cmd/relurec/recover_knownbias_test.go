package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recover latent --known-bias: the known-bias variant estimates c* itself,
// exactly without dense noise; a bias of the wrong shape is bad input (exit
// 2, nothing written).
func TestRecoverKnownBiasCLI(t *testing.T) {
	dir := t.TempDir()
	rob := filepath.Join(dir, "rob.npz")
	if code, _, errs := cli(t, "gen", "robust", "--d", "1000", "--k", "5", "--n", "4", "--s", "20", "--delta", "0", "--seed", "4", "--out", rob); code != 0 {
		t.Fatalf("gen robust: exit %d: %s", code, errs)
	}
	code, out, errs := cli(t, "recover", "latent", "--a", rob, "--v", rob, "--known-bias", rob, "--truth", rob,
		"--out", filepath.Join(dir, "C.npy"), "--json")
	if code != 0 {
		t.Fatalf("recover latent --known-bias: exit %d: %s", code, errs)
	}
	v := decodeOne(t, out)
	if v["all_certified"] != true || v["rule"] != "known-bias" || !(v["mean_error"].(float64) < 1e-10) {
		t.Errorf("known bias: %v", v)
	}
	bad := filepath.Join(dir, "bad.npy")
	code, _, errs = cli(t, "recover", "latent", "--a", rob, "--v", rob, "--known-bias", rob, "--known-bias-name", "A", "--out", bad)
	if code != 2 || !strings.Contains(errs, "want a vector of length d = 1000") {
		t.Errorf("wrong-shape bias: exit %d, %q", code, errs)
	}
	if _, err := os.Stat(bad); err == nil {
		t.Error("output written on bad input")
	}
	code, _, _ = cli(t, "recover", "latent", "--a", rob, "--v", rob, "--known-bias", rob, "--rescale", "--bias", "gaussian:0,0.5", "--out", bad)
	if code != 2 {
		t.Errorf("--known-bias with --rescale: exit %d, want 2", code)
	}
}
