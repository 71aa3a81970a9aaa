// Package jsonsafe makes values encodable by encoding/json when they hold
// NaN or ±Inf floats, which JSON cannot represent: they become null.
package jsonsafe

import (
	"encoding"
	"encoding/json"
	"math"
	"reflect"
	"strings"
)

// Finite returns a value that encodes like v except that NaN and ±Inf
// floats become null: encoding/json refuses them, and a diagnostic such as an
// infinite condition number must not make a result unprintable. It follows
// json struct tags (name, omitempty, "-"); values that implement
// json.Marshaler or encoding.TextMarshaler are kept as they are.
func Finite(v any) any {
	if v == nil {
		return nil
	}
	return walkJSON(reflect.ValueOf(v))
}

var (
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

func walkJSON(rv reflect.Value) any {
	if !rv.IsValid() {
		return nil
	}
	if rv.Type().Implements(jsonMarshalerType) || rv.Type().Implements(textMarshalerType) {
		if (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface) && rv.IsNil() {
			return nil
		}
		return rv.Interface()
	}
	switch rv.Kind() {
	case reflect.Float32, reflect.Float64:
		f := rv.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil
		}
		return f
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil
		}
		return walkJSON(rv.Elem())
	case reflect.Slice:
		if rv.IsNil() {
			return nil
		}
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			return rv.Interface() // []byte encodes as base64
		}
		fallthrough
	case reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = walkJSON(rv.Index(i))
		}
		return out
	case reflect.Map:
		if rv.IsNil() {
			return nil
		}
		if rv.Type().Key().Kind() != reflect.String {
			return rv.Interface()
		}
		out := make(map[string]any, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			out[it.Key().String()] = walkJSON(it.Value())
		}
		return out
	case reflect.Struct:
		return walkStruct(rv)
	default:
		return rv.Interface()
	}
}

// orderedObject keeps a struct's field order when encoded.
type orderedObject struct {
	keys []string
	vals []any
}

func (o orderedObject) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		vb, err := json.Marshal(o.vals[i])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

func walkStruct(rv reflect.Value) any {
	var o orderedObject
	t := rv.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		fv := rv.Field(i)
		if f.Anonymous && name == "" && fv.Kind() == reflect.Struct {
			if inner, ok := walkStruct(fv).(orderedObject); ok {
				o.keys = append(o.keys, inner.keys...)
				o.vals = append(o.vals, inner.vals...)
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		if strings.Contains(opts, "omitempty") && isEmptyJSON(fv) {
			continue
		}
		o.keys = append(o.keys, name)
		o.vals = append(o.vals, walkJSON(fv))
	}
	return o
}

// isEmptyJSON is encoding/json's notion of empty for omitempty.
func isEmptyJSON(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}
