package engine

import (
	"bytes"
	"encoding/json"
	"testing"

	"gseproc/model"
)

// TestProcJSONsFollowTheDefinition: the cached encoding is json.Marshal's
// of the definition asked for, whatever was asked before under its key (a
// changed spec, labels, or labels changed in the caller's map after).
func TestProcJSONsFollowTheDefinition(t *testing.T) {
	base := model.Process{Meta: model.Meta{Namespace: "ns", Name: "app", Labels: model.Labels{"a": "1"}}}
	base.Spec.Identity.ProcName = "app"
	spec2 := base
	spec2.Spec.Identity.ProcName = "app2"
	labels2 := base
	labels2.Meta.Labels = model.Labels{"a": "2"}
	noLabels := base
	noLabels.Meta.Labels = nil
	var c procJSONs
	for i, p := range []model.Process{base, base, spec2, base, labels2, noLabels, base} {
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.get("ns:app", p); !bytes.Equal(got, want) {
			t.Fatalf("step %d: got %s, want %s", i, got, want)
		}
	}
	// The caller's map changed in place after it was cached.
	mine := base
	mine.Meta.Labels = model.Labels{"a": "1"}
	c.get("ns:app", mine)
	mine.Meta.Labels["a"] = "3"
	want, _ := json.Marshal(mine)
	if got := c.get("ns:app", mine); !bytes.Equal(got, want) {
		t.Fatalf("after an in-place change: got %s, want %s", got, want)
	}
}
