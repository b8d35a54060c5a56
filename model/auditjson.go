package model

import "encoding/json"

// AppendAuditJSON appends e encoded as json.Marshal encodes it, byte for
// byte (a time json refuses: by json.Marshal of the whole entry; the two
// never differ, FuzzAuditJSON). Every operation appends two entries (its
// creation and its end), each encoded once to be stored.
func AppendAuditJSON(b []byte, e *AuditEntry) ([]byte, error) {
	if out, ok := appendAudit(b, e); ok {
		return out, nil
	}
	data, err := json.Marshal(e)
	if err != nil {
		return b, err
	}
	return append(b, data...), nil
}

func appendAudit(b []byte, e *AuditEntry) ([]byte, bool) {
	w := jw{b: b, ok: true}
	w.key(`{"seq":`)
	w.uint(e.Seq)
	w.key(`,"time":`)
	w.time(e.Time)
	w.key(`,"actor":{`)
	first := true
	for _, f := range [...]struct{ k, v string }{
		{`"app":`, e.Actor.App}, {`"user":`, e.Actor.User}, {`"operator":`, e.Actor.Operator}, {`"via":`, e.Actor.Via},
	} {
		if f.v == "" {
			continue
		}
		if !first {
			w.b = append(w.b, ',')
		}
		first = false
		w.key(f.k)
		w.str(f.v)
	}
	w.key(`},"action":`)
	w.str(e.Action)
	if e.Op != "" {
		w.key(`,"op":`)
		w.str(e.Op)
	}
	for _, f := range [...]struct {
		k  string
		vs []string
	}{{`,"namespaces":[`, e.Namespaces}, {`,"targets":[`, e.Targets}} {
		if len(f.vs) == 0 {
			continue
		}
		w.key(f.k)
		for i, v := range f.vs {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.str(v)
		}
		w.b = append(w.b, ']')
	}
	if e.TargetCount != 0 {
		w.key(`,"target_count":`)
		w.int(int64(e.TargetCount))
	}
	if e.TaskID != "" {
		w.key(`,"task_id":`)
		w.str(e.TaskID)
	}
	w.key(`,"result":`)
	w.str(e.Result)
	if e.Summary != "" {
		w.key(`,"summary":`)
		w.str(e.Summary)
	}
	w.b = append(w.b, '}')
	return w.b, w.ok
}
