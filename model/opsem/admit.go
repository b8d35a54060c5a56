package opsem

import (
	"fmt"

	"gseproc/model"
)

// Admit decides whether a host that knows known process definitions takes
// one more: an op (any but a status query) on a process the host does not
// know yet stores its definition, and the host reports every definition it
// knows at each heartbeat, of which a server keeps model.MaxHostProcs. So
// a host knows at most limit definitions (model.MaxHostProcs; a test may
// pass a lower one): past it the op is refused with CodeCommandFailed and
// a message naming the limit; nothing is stored, nothing runs. Processes
// the host knows already are not concerned. ok is true when the
// definition is taken (code and msg are then 0 and "").
func Admit(known, limit int, name string) (code int, msg string, ok bool) {
	if known < limit {
		return model.CodeSuccess, "", true
	}
	return model.CodeCommandFailed, fmt.Sprintf("%s: process(%s) refused: this host already knows %d process definitions, the most an agent hosts (%d, model.MaxHostProcs); nothing was stored or run",
		model.CodeText(model.CodeCommandFailed), name, known, limit), false
}
