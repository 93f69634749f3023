package webui

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
)

// TestLoginTakesMultipartForm: a login posted as multipart/form-data
// (curl -F token=…, a script's FormData) logs in with a valid token, as
// the urlencoded form does; it was answered invalid_token, the form's
// fields unread. A file part, which a login has no use for, is refused,
// and a body of another type is 415 naming the types taken.
func TestLoginTakesMultipartForm(t *testing.T) {
	srv, c := newTestUI()
	defer srv.Close()
	post := func(ct string, body io.Reader) (*http.Response, string) {
		t.Helper()
		res, err := c.Post(srv.URL+"/login", ct, body)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res, string(b)
	}
	multi := func(file bool) (string, io.Reader) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		_ = mw.WriteField("token", "good")
		_ = mw.WriteField("next", "/hosts/local/terminal")
		if file {
			fw, _ := mw.CreateFormFile("token", "token.txt")
			_, _ = io.WriteString(fw, "good")
		}
		_ = mw.Close()
		return mw.FormDataContentType(), &buf
	}

	res, body := post(multi(false))
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/hosts/local/terminal" || len(res.Cookies()) != 1 {
		t.Errorf("multipart login with a valid token: %d %q cookies %v %s; want 303 to next with the session cookie", res.StatusCode, res.Header.Get("Location"), res.Cookies(), body)
	}
	res, body = post(multi(true))
	if res.StatusCode != http.StatusBadRequest || len(res.Cookies()) != 0 || !strings.Contains(body, "file") {
		t.Errorf("multipart login with a file part: %d %s; want 400 saying a file is not taken", res.StatusCode, body)
	}
	res, body = post("application/json", strings.NewReader(`{"token":"good"}`))
	if res.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(body, "application/x-www-form-urlencoded") || !strings.Contains(body, "multipart/form-data") {
		t.Errorf("JSON login: %d %s; want 415 naming the form types taken", res.StatusCode, body)
	}
}
