package theme

import (
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// styles returns every lipgloss.Style field of t.
func styles(t *Theme) map[string]lipgloss.Style {
	out := map[string]lipgloss.Style{}
	v := reflect.ValueOf(t).Elem()
	for i := range v.NumField() {
		if s, ok := v.Field(i).Interface().(lipgloss.Style); ok {
			out[v.Type().Field(i).Name] = s
		}
	}
	return out
}

var sgr = regexp.MustCompile(`\x1b\[([0-9;]*)m`)

// params lists the SGR parameters a rendering uses.
func params(s string) [][]int {
	var out [][]int
	for _, m := range sgr.FindAllStringSubmatch(s, -1) {
		var ps []int
		for _, p := range strings.Split(m[1], ";") {
			n, _ := strconv.Atoi(p)
			ps = append(ps, n)
		}
		out = append(out, ps)
	}
	return out
}

func renderer(p termenv.Profile) *lipgloss.Renderer {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(p)
	return r
}

func TestNames(t *testing.T) {
	for _, n := range Names() {
		th, err := New(n, renderer(termenv.TrueColor), false)
		if err != nil || th.Name != n {
			t.Fatalf("%s: %v %v", n, th, err)
		}
	}
	if _, err := New("neon", nil, false); err == nil || !strings.Contains(err.Error(), "neon") {
		t.Fatalf("unknown theme: %v", err)
	}
	th, _ := New("dark", nil, true)
	if th.Name != "mono" {
		t.Fatalf("noColor gave %s", th.Name)
	}
}

// ansi16 only names the terminal's own colours 0-15, even on a true-colour
// terminal: 30-37, 90-97 (foreground), 40-47, 100-107 (background).
func TestANSI16UsesThePalette(t *testing.T) {
	th, err := New("ansi16", renderer(termenv.TrueColor), false)
	if err != nil {
		t.Fatal(err)
	}
	colours := 0 // a theme that rendered no colour at all would pass vacuously
	for name, s := range styles(th) {
		for _, ps := range params(s.Render("x")) {
			for i := 0; i < len(ps); i++ {
				switch p := ps[i]; {
				case p == 38 || p == 48:
					t.Fatalf("%s uses an extended colour: %v", name, ps)
				case p >= 30 && p <= 37, p >= 90 && p <= 97, p >= 40 && p <= 47, p >= 100 && p <= 107:
					colours++
				case p <= 9 || p == 39 || p == 49 || (p >= 21 && p <= 29):
				default:
					t.Fatalf("%s: unexpected SGR %d in %v", name, p, ps)
				}
			}
		}
	}
	if colours == 0 {
		t.Fatal("ansi16 rendered no colour at all")
	}
	if th.Profile != termenv.ANSI {
		t.Fatalf("progress profile %v", th.Profile)
	}
}

// mono has no colour at all, only attributes.
func TestMonoHasNoColour(t *testing.T) {
	th, _ := New("mono", renderer(termenv.TrueColor), false)
	attrs := 0
	for name, s := range styles(th) {
		for _, ps := range params(s.Render("x")) {
			for _, p := range ps {
				if (p >= 30 && p <= 49) || (p >= 90 && p <= 107) {
					t.Fatalf("%s has colour: %v", name, ps)
				}
				if p > 0 {
					attrs++
				}
			}
		}
	}
	if attrs == 0 {
		t.Fatal("mono uses no attribute at all: the cursor would be invisible")
	}
}

// Every semantic style differs between dark and light (they are not one
// palette), and states of different meaning look different.
func TestDarkLightDistinct(t *testing.T) {
	d, _ := New("dark", renderer(termenv.TrueColor), false)
	l, _ := New("light", renderer(termenv.TrueColor), false)
	if d.OK.Render("x") == l.OK.Render("x") {
		t.Fatal("dark and light OK look the same")
	}
	for _, th := range []*Theme{d, l} {
		if th.OK.Render("x") == th.Error.Render("x") || th.Warn.Render("x") == th.Error.Render("x") {
			t.Fatalf("%s: ok, warn and error are not distinct", th.Name)
		}
	}
}
