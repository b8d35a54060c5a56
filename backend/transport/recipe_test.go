package transport

import (
	"reflect"
	"testing"
	"time"

	"gseproc/model"
)

// An async request in flight keeps a recipe, not its encoding, and is
// encoded from it again at each publish: a field of model.AgentRequest
// the recipe does not carry would be dropped from the request without a
// word. It fails when model.AgentRequest gains a field recipeOf does not
// take (or refuse, as Group and Tail), and when one it takes is lost.
func TestRecipeKeepsEveryField(t *testing.T) {
	// How the recipe treats each field: kept, made from ProcessJSON, or
	// not made into a recipe at all.
	known := map[string]string{
		"TaskID": "kept", "OpID": "kept", "Op": "kept", "Deadline": "kept", "CancelOp": "kept",
		"ProcessJSON": "kept", "Process": "encoded in ProcessJSON",
		"Group": "no recipe", "Tail": "no recipe",
	}
	rt := reflect.TypeFor[model.AgentRequest]()
	for i := range rt.NumField() {
		if f := rt.Field(i); known[f.Name] == "" {
			t.Errorf("model.AgentRequest.%s: recipeOf and call.request do not carry it; add it to recipe (or refuse it in recipeOf)", f.Name)
		}
	}
	req := model.AgentRequest{TaskID: "t", OpID: "t/0:10.0.0.1/ns:p", Op: model.OpStop,
		Deadline: time.Unix(1700000000, 0).UTC(), CancelOp: true, ProcessJSON: []byte(`{"name":"p"}`)}
	rec, ok := recipeOf(&req)
	if !ok {
		t.Fatal("no recipe for a request with ProcessJSON")
	}
	c := call{opID: req.OpID, taskID: req.TaskID, rec: rec}
	if got := c.request(); !reflect.DeepEqual(got, req) {
		t.Fatalf("made again %+v, want %+v", got, req)
	}
	for _, r := range []model.AgentRequest{{ProcessJSON: req.ProcessJSON, Group: &model.ProcessGroup{}}, {ProcessJSON: req.ProcessJSON, Tail: &model.TailRequest{}}, {}} {
		if _, ok := recipeOf(&r); ok {
			t.Errorf("recipe for %+v, want none", r)
		}
	}
}
