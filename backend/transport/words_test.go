package transport

import (
	"fmt"
	"sync"
	"testing"
	"unsafe"
)

// A word table gives one copy of each text, from any goroutine, through
// its recent slots and its parts alike: texts that share a slot of recent
// (more texts than slots) each keep their own copy.
func TestWordTableOneCopy(t *testing.T) {
	var words wordTable
	texts := make([]string, 3*wordRecent)
	for i := range texts {
		texts[i] = fmt.Sprintf("word-%d", i)
	}
	first := make([]string, len(texts))
	for i, s := range texts {
		first[i] = words.get([]byte(s))
		if first[i] != s {
			t.Fatalf("get(%q) = %q", s, first[i])
		}
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for round := range 3 {
				for i, s := range texts {
					if got := words.get([]byte(s)); got != s || unsafe.StringData(got) != unsafe.StringData(first[i]) {
						t.Errorf("round %d: get(%q) = %q, not the copy kept first", round, s, got)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if got := words.get(nil); got != "" {
		t.Fatalf("get(nil) = %q", got)
	}
}
