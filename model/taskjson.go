package model

import (
	"encoding/json"
	"slices"
	"strings"
)

// AppendTaskJSON appends t encoded as json.Marshal encodes it, byte for
// byte. The store writes a task record when the task is created and when
// it ends: two encodings per operate call, which encoding/json's
// reflection made a share of every call's CPU. A roll (Rollout or Roll
// set), or a value the appender leaves to encoding/json, is encoded by
// json.Marshal of the whole task: the two never differ (FuzzTaskJSON).
func AppendTaskJSON(b []byte, t *Task) ([]byte, error) {
	if t.Rollout == nil && t.Roll == nil {
		if out, ok := appendTask(b, t); ok {
			return out, nil
		}
	}
	data, err := json.Marshal(t)
	if err != nil {
		return b, err
	}
	return append(b, data...), nil
}

func appendTask(b []byte, t *Task) ([]byte, bool) {
	w := jw{b: b, ok: true}
	w.key(`{"task_id":`)
	w.str(t.ID)
	w.key(`,"op_type":`)
	w.int(int64(t.Op))
	w.key(`,"targets":`)
	w.int(int64(t.Targets))
	if len(t.Namespace) > 0 {
		w.key(`,"namespaces":[`)
		for i, ns := range t.Namespace {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.str(ns)
		}
		w.b = append(w.b, ']')
	}
	if t.Source != "" {
		w.key(`,"source":`)
		w.str(t.Source)
	}
	if t.Operator != "" {
		w.key(`,"operator":`)
		w.str(t.Operator)
	}
	if len(t.Suppliers) > 0 {
		// As encoding/json writes a map: keys sorted.
		w.key(`,"bk_supplier_ids":{`)
		keys := make([]string, 0, len(t.Suppliers))
		for k := range t.Suppliers {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, strings.Compare)
		for i, k := range keys {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.str(k)
			w.b = append(w.b, ':')
			w.int(int64(t.Suppliers[k]))
		}
		w.b = append(w.b, '}')
	}
	if t.Selection != "" {
		w.key(`,"selection":`)
		w.str(t.Selection)
	}
	w.key(`,"status":`)
	w.str(string(t.Status))
	w.key(`,"created":`)
	w.time(t.Created)
	if !t.Finished.IsZero() {
		w.key(`,"finished":`)
		w.time(t.Finished)
	}
	c := &t.Counts
	for _, f := range [...]struct {
		k string
		v int
	}{{`,"counts":{"pending":`, c.Pending}, {`,"running":`, c.Running}, {`,"success":`, c.Success}, {`,"failed":`, c.Failed},
		{`,"timeout":`, c.Timeout}, {`,"unreachable":`, c.Unreachable}, {`,"cancelled":`, c.Cancelled}, {`,"skipped":`, c.Skipped}} {
		w.key(f.k)
		w.int(int64(f.v))
	}
	w.b = append(w.b, "}}"...)
	return w.b, w.ok
}
