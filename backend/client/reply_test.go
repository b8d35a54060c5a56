package client

import (
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"gseproc/backend"
	"gseproc/model"
)

func reply(status int, body string) *http.Response {
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Body: io.NopCloser(strings.NewReader(body))}
}

// TestReadReply: a reply is decoded from its body as a stream, whatever
// the order of the envelope's keys; errors keep their kinds; a body that
// is no envelope is quoted.
func TestReadReply(t *testing.T) {
	var got []model.Host
	for _, body := range []string{
		`{"result":true,"code":0,"message":"success","data":[{"ip":"10.0.0.1","bk_cloud_id":0},{"ip":"10.0.0.2","bk_cloud_id":3}],"permission":null,"request_id":"r"}`,
		`{"data":[{"ip":"10.0.0.1","bk_cloud_id":0},{"ip":"10.0.0.2","bk_cloud_id":3}],"code":0,"result":true}`,
	} {
		got = nil
		if err := readReply(reply(200, body), listOf[model.Host]{p: &got}); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if want := []model.Host{{IP: "10.0.0.1"}, {IP: "10.0.0.2", CloudID: 3}}; !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %+v, want %+v", body, got, want)
		}
	}
	got = []model.Host{{IP: "x"}}
	if err := readReply(reply(200, `{"result":true,"code":0,"data":[]}`), listOf[model.Host]{p: &got}); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("[]: %v %#v, want an empty list", err, got)
	}
	if err := readReply(reply(200, `{"result":true,"code":0,"data":null}`), listOf[model.Host]{p: &got}); err != nil || got != nil {
		t.Fatalf("null: %v %#v, want nil", err, got)
	}
	var n int
	if err := readReply(reply(200, `{"result":true,"code":0,"data":7}`), &n); err != nil || n != 7 {
		t.Fatalf("7: %v %d", err, n)
	}
	err := readReply(reply(400, `{"result":false,"code":1306406,"message":"bad","data":{"kind":"validation","errors":[{"field":"op_type","reason":"no"}]},"request_id":"r"}`), &got)
	var ve model.ValidationError
	if !errors.As(err, &ve) || ve.Fields()[0] != "op_type" {
		t.Fatalf("validation: %v", err)
	}
	err = readReply(reply(404, `{"result":false,"code":1306404,"message":"task x: not found","data":{"kind":"not_found"},"request_id":"r9"}`), &got)
	var ae *APIError
	if !errors.As(err, &ae) || !errors.Is(err, model.ErrNotFound) || ae.RequestID != "r9" || ae.Message != "task x: not found" {
		t.Fatalf("not found: %v", err)
	}
	for _, body := range []string{"<html>bad gateway</html>", `{"result":true,"code":0,"data":[1,2`, `[1]`, ``,
		`{"result":true,"code":0,"data":[]} x`, `{"result":true,"code":0,"data":[]}{}`, `{"result":true,"code":0,"data":[],"data":[]}`} {
		err := readReply(reply(502, body), &got)
		if err == nil || !strings.Contains(err.Error(), "not a gseproc envelope") && !strings.Contains(err.Error(), "decode data") {
			t.Fatalf("%q: %v, want it refused", body, err)
		}
	}
	if err := readReply(reply(502, "<html>bad gateway</html>"), nil); err == nil || !strings.Contains(err.Error(), "bad gateway") {
		t.Fatalf("no envelope: %v, want the body quoted", err)
	}
}

// TestTaskViewDecoding: a task view's results are decoded into a slice
// made for the task's targets; skipped when not wanted.
func TestTaskViewDecoding(t *testing.T) {
	body := `{"result":true,"code":0,"data":{"task":{"task_id":"T1","targets":3,"status":"done"},` +
		`"results":[{"task_id":"T1","seq":1,"host":{"ip":"10.0.0.1","bk_cloud_id":0},"proc":"a:b","state":"success"},` +
		`{"task_id":"T1","seq":2,"host":{"ip":"10.0.0.2","bk_cloud_id":0},"proc":"a:b","state":"failed","error_msg":"x"}],"roll":null}}`
	var tv backend.TaskView
	if err := readReply(reply(200, body), taskViewOf{v: &tv}); err != nil {
		t.Fatal(err)
	}
	if tv.Task.ID != "T1" || len(tv.Results) != 2 || cap(tv.Results) != 3 || tv.Results[1].Message != "x" || tv.Results[1].Host.IP != "10.0.0.2" {
		t.Fatalf("%+v", tv)
	}
	var head backend.TaskView
	if err := readReply(reply(200, body), taskViewOf{v: &head, skipResults: true}); err != nil {
		t.Fatal(err)
	}
	if head.Task.ID != "T1" || head.Results != nil {
		t.Fatalf("head %+v, want the task without results", head)
	}
}

// TestHostsShareLabelSets: equal label sets of a listing are one map, a
// different one is not; versions are held once.
func TestHostsShareLabelSets(t *testing.T) {
	body := `{"result":true,"code":0,"data":[` +
		`{"host":{"ip":"10.0.0.1","bk_cloud_id":0},"labels":{"a":"1","b":"2"},"agent_version":"v1","procs":[{"proc":"n:p","labels":{"app":"x"}}]},` +
		`{"host":{"ip":"10.0.0.2","bk_cloud_id":0},"labels":{"b":"2","a":"1"},"agent_version":"v1","procs":[{"proc":"n:p","labels":{"app":"x"}}]},` +
		`{"host":{"ip":"10.0.0.3","bk_cloud_id":0},"labels":{"a":"1","b":"3"},"procs":[{"proc":"n:p","labels":{"app":"y"}}]}]}`
	var hv []backend.HostView
	if err := readReply(reply(200, body), &hostsOf{p: &hv}); err != nil {
		t.Fatal(err)
	}
	if len(hv) != 3 || hv[1].Labels["a"] != "1" || hv[2].Labels["b"] != "3" || hv[2].Version != "" {
		t.Fatalf("%+v", hv)
	}
	if !sameMap(hv[0].Labels, hv[1].Labels) || sameMap(hv[0].Labels, hv[2].Labels) {
		t.Fatal("equal host label sets not shared, or different ones shared")
	}
	if !sameMap(hv[0].Procs[0].Labels, hv[1].Procs[0].Labels) || sameMap(hv[0].Procs[0].Labels, hv[2].Procs[0].Labels) {
		t.Fatal("equal process label sets not shared, or different ones shared")
	}
	if hv[0].Version != "v1" || !sameString(hv[0].Version, hv[1].Version) {
		t.Fatal("version not held once")
	}
}

func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func sameString(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// TestReadReplyRawData: a listing in the list form (read whole, by hand:
// rawDecoder) is read wherever its data stands in the envelope and
// however it is spaced, the envelope after it read on and checked; an
// error reply stays an error.
func TestReadReplyRawData(t *testing.T) {
	const data = `{"labels":[["os","linux"]],"procs":[{"proc":"web:nginx","labels":{"app":"nginx"}}],"hosts":[["0:10.0.0.1","online","v1","",5,[0],[[0,"running",42,true]]],["3:10.0.0.2","offline","","",0,[],[]]]}`
	read := func(body string) ([]string, error) {
		var got []string
		err := readReply(reply(200, body), &hostListOf{each: func(v *backend.HostView) {
			s := v.Host.AgentID() + " " + string(v.State) + " " + v.Labels["os"]
			for _, p := range v.Procs {
				s += " " + p.Key + "/" + p.Labels["app"] + "/" + string(p.Status.State) + "/" + strconv.Itoa(p.Status.PID) + "/" + strconv.FormatBool(p.Status.Hosted)
			}
			got = append(got, s)
		}})
		return got, err
	}
	want := []string{"0:10.0.0.1 online linux web:nginx/nginx/running/42/true", "3:10.0.0.2 offline "}
	for _, body := range []string{
		`{"result":true,"code":0,"message":"success","data":` + data + `,"permission":null,"request_id":"r"}` + "\n",
		`{"result":true,"code":0,"data" :` + "\n " + data + ` , "request_id":"r"}`,
		`{"data":` + data + `,"code":0,"result":true}`,
		// The full form, from a server before the list form.
		`{"result":true,"code":0,"data":[{"host":{"ip":"10.0.0.1","bk_cloud_id":0},"labels":{"os":"linux"},"agent_state":"online","procs":[{"proc":"web:nginx","labels":{"app":"nginx"},"status":{"state":"running","pid":42,"is_auto":true}}]},{"host":{"ip":"10.0.0.2","bk_cloud_id":3},"agent_state":"offline"}],"request_id":"r"}`,
	} {
		got, err := read(body)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\n%q, %v\nwant %q", body, got, err, want)
		}
	}
	for _, c := range []struct{ body, want string }{
		{`{"result":true,"code":0,"data":` + data + ` x}`, "not a gseproc envelope"},
		{`{"result":true,"code":0,"data":` + data + `,"data":[]}`, "not a gseproc envelope"},
		{`{"result":true,"code":0,"data":` + data + `} {}`, "not a gseproc envelope"},
		{`{"result":true,"code":0,"data":{"labels":[],"procs":[],"hosts":[["x"]]}}`, "hosts[0][0]"},
		{`{"result":false,"code":1306406,"message":"bad form","data":{"kind":"validation","errors":[{"field":"form","reason":"no"}]}}`, "form: no"},
	} {
		if _, err := read(c.body); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.body, err, c.want)
		}
	}
}
