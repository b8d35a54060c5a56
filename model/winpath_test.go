package model

import (
	"strings"
	"testing"
)

func TestWindowsPaths(t *testing.T) {
	cases := []struct {
		ext, path string
		want      string // "" = accepted, else part of the error
	}{
		{"bat", `C:\gse\plugins\bin`, ""},
		{"ps1", `C:/gse/plugins/bin`, ""},
		{"bat", `d:\data\x.pid`, ""},
		{"bat", `/usr/local/gse`, ""}, // cygwin-style stays accepted
		{"bat", `C:\gse\..\windows`, "'..'"},
		{"ps1", `C:/gse/../x`, "'..'"},
		{"bat", `C:\gse\a|b`, "not allowed"},
		{"bat", `C:\gse\a:b`, "not allowed"},
		{"bat", "C:\\gse\nx", "newline"},
		{"bat", `gse\bin`, "not an absolute path"},
		{"bat", `C:gse`, "not an absolute path"},
		{"sh", `C:\gse\plugins\bin`, "not an absolute path"},
		{"", `C:/gse`, "not an absolute path"},
	}
	for _, tc := range cases {
		v := &Validator{}
		v.checkHostPath("spec.identity.setup_path", tc.path, true, tc.ext)
		err := v.Err()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %q refused: %v", tc.ext, tc.path, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s %q: %v, want an error saying %q", tc.ext, tc.path, err, tc.want)
		}
	}
}
