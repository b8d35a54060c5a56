package engine

import (
	"encoding/json"
	"maps"
	"sync"

	"gseproc/model"
)

// procJSONs are the encodings of the definitions sent to hosts
// (AgentRequest.ProcessJSON), the last one of each key: made once per
// definition, not once per task (a one-host status query per API call
// encoded its definition every call). An encoding is read only: every
// request of every task shares it.
type procJSONs struct {
	mu sync.Mutex
	m  map[string]procJSON
}

type procJSON struct {
	p    model.Process // its labels the cache's own copy
	data []byte        // nil: p could not be encoded
}

// procJSONMax bounds the encodings kept: inline definitions (operate with
// a spec) bring keys the registry does not have. Past it the cache starts
// again.
const procJSONMax = 4096

// get is the encoding of process p, of key; nil when it cannot be encoded
// (the request is then encoded whole, and fails the same way).
func (c *procJSONs) get(key string, p model.Process) []byte {
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if ok && sameDefinition(e.p, p) {
		return e.data
	}
	data, err := json.Marshal(p)
	if err != nil {
		data = nil
	}
	p.Meta.Labels = maps.Clone(p.Meta.Labels)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= procJSONMax {
		c.m = make(map[string]procJSON)
	}
	c.m[key] = procJSON{p: p, data: data}
	c.mu.Unlock()
	return data
}

// sameDefinition says whether a and b encode alike: every field equal.
func sameDefinition(a, b model.Process) bool {
	return a.Spec == b.Spec && a.Meta.Namespace == b.Meta.Namespace && a.Meta.Name == b.Meta.Name &&
		maps.Equal(a.Meta.Labels, b.Meta.Labels)
}
