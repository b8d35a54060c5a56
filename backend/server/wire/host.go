package wire

import (
	"fmt"
	"strings"

	"gseproc/model"
)

// Host is a host as the GSE/JOB forms send it: model.Host plus the v1
// forms' bk_supplier_id, which only the v1 result keys
// (cloud:supplier:ip:namespace:name) use. The supplier id never enters the
// domain: Suppliers collects it and the task stores it (model.Task.Suppliers).
type Host struct {
	IP         string `json:"ip"`
	CloudID    int    `json:"bk_cloud_id"`
	SupplierID int    `json:"bk_supplier_id,omitempty"`
}

// Model is the domain host (the supplier id left out), as it was sent.
func (h Host) Model() model.Host { return model.Host{IP: h.IP, CloudID: h.CloudID} }

// Canonicalize returns the domain host in canonical form, recording in v,
// under field, every part that is wrong (field.ip, field.bk_cloud_id,
// field.bk_supplier_id); the zero Host when something is.
func (h Host) Canonicalize(v *model.Validator, field string) model.Host {
	n := len(v.Errors())
	c := h.Model().Canonicalize(v, field)
	if h.SupplierID < 0 || h.SupplierID > model.MaxCloudID {
		v.Addf(field+".bk_supplier_id", "%d is out of range [0,%d]", h.SupplierID, model.MaxCloudID)
	}
	if len(v.Errors()) != n {
		return model.Host{}
	}
	return c
}

// CanonicalHosts canonicalizes every host of hs (errors under "field[i]").
func CanonicalHosts(v *model.Validator, field string, hs []Host) []model.Host {
	if hs == nil {
		return nil
	}
	out := make([]model.Host, len(hs))
	for i, h := range hs {
		out[i] = h.Canonicalize(v, fmt.Sprintf("%s[%d]", field, i))
	}
	return out
}

// Suppliers adds the non-zero supplier ids of hs to m, keyed by the
// canonical "cloud:ip", and returns m (made when nil and needed). Hosts
// that do not canonicalize are left out (the request is refused anyway).
func Suppliers(m map[string]int, hs []Host) map[string]int {
	for _, h := range hs {
		if h.SupplierID == 0 {
			continue
		}
		c, err := h.Model().Canonical()
		if err != nil {
			continue
		}
		if m == nil {
			m = map[string]int{}
		}
		m[c.AgentID()] = h.SupplierID
	}
	return m
}

// HostRef is a host as a GSE 2.0 request names it: by "cloud:ip" (Host) or
// by agent id (AgentID, canonical); exactly one is set.
type HostRef struct {
	Host    model.Host
	AgentID string
}

// ParseHostRef parses an agent_id_list entry: "cloud:ip" (nodeman's agent
// id when dynamic addressing is off) or a GSE 2.0 agent id.
func ParseHostRef(s string) (HostRef, error) {
	if strings.Contains(s, ":") {
		h, err := model.ParseAgentID(s)
		return HostRef{Host: h}, err
	}
	id, err := model.CheckAgentID(s)
	if err != nil {
		return HostRef{}, fmt.Errorf("%w (or give cloud:ip, e.g. 0:10.0.0.1)", err)
	}
	return HostRef{AgentID: id}, nil
}

// String is the ref as the request spelled it (canonical).
func (r HostRef) String() string {
	if r.AgentID != "" {
		return r.AgentID
	}
	return r.Host.AgentID()
}
