package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// lastJSON decodes the last line of out as a JSON object.
func lastJSON(t *testing.T, out string) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		t.Fatalf("last line of output is not a JSON object: %v\noutput:\n%s", err, out)
	}
	return m
}

// checkEcho reports the keys of m whose values are not those of want.
func checkEcho(t *testing.T, m map[string]any, want map[string]any) {
	t.Helper()
	for key, v := range want {
		if m[key] != v {
			t.Errorf("%s = %v, want %v", key, m[key], v)
		}
	}
}

// num returns the JSON number m[key], failing the test if it is missing.
func num(t *testing.T, m map[string]any, key string) float64 {
	t.Helper()
	v, ok := m[key].(float64)
	if !ok {
		t.Fatalf("JSON has no number %q: %v", key, m)
	}
	return v
}
