package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestBenchCompareRefusesUnknownTool: `bench compare --only` with a name
// that is not a tool compared is a usage error naming it, before anything
// starts (it would otherwise measure gseproc alone).
func TestBenchCompareRefusesUnknownTool(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"bench", "compare", "--only", "s6,supervisor"}, Stdio{In: strings.NewReader(""), Out: &out, Err: &errb})
	if code != 2 || !strings.Contains(errb.String(), `--only: "supervisor" is not a tool compared`) {
		t.Fatalf("code %d, stderr %q, stdout %q; want 2 and the name refused", code, errb.String(), out.String())
	}
}
