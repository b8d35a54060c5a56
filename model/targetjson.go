package model

// AppendTargetsJSON appends ts encoded as json.Marshal encodes them (a
// nil slice as null), byte for byte. The store writes a task's targets
// when it is created, in chunks of thousands: an op over 100,000 hosts
// wrote ~84,000, and encoding/json's reflection was ~30 ms of the
// server's CPU and ~7 MB of its allocations, before the first request
// was sent (FuzzTargetsJSON compares the two).
func AppendTargetsJSON(b []byte, ts []Target) []byte {
	if ts == nil {
		return append(b, "null"...)
	}
	w := jw{b: append(b, '['), ok: true}
	for i := range ts {
		t := &ts[i]
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.key(`{"host":`)
		w.host(t.Host)
		w.key(`,"proc":`)
		w.str(t.ProcKey)
		if t.AgentID != "" {
			w.key(`,"agent_id":`)
			w.str(t.AgentID)
		}
		w.b = append(w.b, '}')
	}
	return append(w.b, ']')
}
