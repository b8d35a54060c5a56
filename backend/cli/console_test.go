package cli

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"gseproc/model"
)

func TestConsoleFlags(t *testing.T) {
	tests := []struct {
		args     []string
		wantCode int
		wantErr  string
	}{
		{[]string{"--op", "restart"}, 2, "--label and --op need --ns"},
		{[]string{"--label", "app=nginx"}, 2, "--label and --op need --ns"},
		{[]string{"--ns", "web", "--label", "nokey"}, 2, `--label: want KEY=VALUE, got "nokey"`},
		{[]string{"--ns", "web", "--op", "explode"}, 2, `unknown op "explode"`},
		{[]string{"--theme", "neon"}, 2, `theme "neon"`},
		{[]string{"extra"}, 2, "unknown command"},
		{[]string{"console", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"--bogus"}, 2, "flag provided but not defined: -bogus"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(context.Background(), tc.args, Stdio{In: strings.NewReader(""), Out: &out, Err: &errb})
			if code != tc.wantCode || !strings.Contains(errb.String(), tc.wantErr) {
				t.Fatalf("code %d, stderr %q; want %d and %q", code, errb.String(), tc.wantCode, tc.wantErr)
			}
		})
	}
}

func TestConsoleFlagsParsed(t *testing.T) {
	f, labels, op, err := parseConsoleFlags([]string{"--ns", "web", "--label", "app=nginx", "--label", "env=prod",
		"--op", "restart", "--theme", "mono", "--no-color", "--read-only"}, Stdio{Err: &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	if f.ns != "web" || labels["app"] != "nginx" || labels["env"] != "prod" || op == nil || *op != model.OpRestart ||
		f.theme != "mono" || !f.noColor || !f.readOnly {
		t.Fatalf("%+v %v %v", f, labels, op)
	}
}

// Without a terminal (CI, pipes) the console says so and exits non-zero
// instead of hanging.
func TestConsoleNeedsATerminal(t *testing.T) {
	t.Setenv("GSEPROC_CONFIG", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	var out, errb bytes.Buffer
	code := Main(context.Background(), nil, Stdio{In: strings.NewReader(""), Out: &out, Err: &errb})
	if code != 1 || !strings.Contains(errb.String(), "needs a terminal") {
		t.Fatalf("code %d stderr %q", code, errb.String())
	}
	// A real file that is not a terminal is refused the same way.
	f, err := os.CreateTemp(t.TempDir(), "stdin")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	errb.Reset()
	code = Main(context.Background(), []string{"console"}, Stdio{In: f, Out: f, Err: &errb})
	if code != 1 || !strings.Contains(errb.String(), "stdin is not one") {
		t.Fatalf("code %d stderr %q", code, errb.String())
	}
	if out.Len() != 0 {
		t.Fatalf("wrote to stdout: %q", out.String())
	}
}
