package model

import "encoding/json"

// AppendRequestJSON appends r encoded as json.Marshal encodes it, byte for
// byte, taking r.ProcessJSON as Process's encoding when it is set: an op
// over 100,000 hosts sends a request to each, the same process every
// time, and encoding it by reflection for every host was most of the
// request's cost. A request without ProcessJSON, or one of a group or a
// tail, is encoded by json.Marshal (FuzzRequestJSON: the two never
// differ when ProcessJSON is Process's encoding).
func AppendRequestJSON(b []byte, r *AgentRequest) ([]byte, error) {
	if r.ProcessJSON == nil || r.Group != nil || r.Tail != nil {
		return appendRequestMarshalled(b, r)
	}
	w := jw{b: b, ok: true}
	w.key(`{"task_id":`)
	w.str(r.TaskID)
	if r.OpID != "" {
		w.key(`,"op_id":`)
		w.str(r.OpID)
	}
	w.key(`,"op_type":`)
	w.int(int64(r.Op))
	w.key(`,"process":`)
	w.b = append(w.b, r.ProcessJSON...)
	if !r.Deadline.IsZero() {
		w.key(`,"deadline":`)
		w.time(r.Deadline)
	}
	if r.CancelOp {
		w.key(`,"cancel_op":true`)
	}
	w.b = append(w.b, '}')
	if !w.ok {
		return appendRequestMarshalled(b, r)
	}
	return w.b, nil
}

// appendRequestMarshalled appends json.Marshal's encoding of r. It
// marshals a copy: r itself is not kept (json.Marshal of r made every
// caller's request escape, an allocation of ~370 bytes per dispatch).
func appendRequestMarshalled(b []byte, r *AgentRequest) ([]byte, error) {
	c := *r
	data, err := json.Marshal(&c)
	if err != nil {
		return b, err
	}
	return append(b, data...), nil
}
