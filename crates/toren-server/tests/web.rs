//! The web page through the router (no socket, no browser): sign-in and its cookie, the
//! CSRF token on state-changing requests, requests from other sites refused (login CSRF
//! included), the security headers, and values from runs escaped. The browser suite
//! (crates/toren/tests/suite/web.rs) drives the same pages in headless Chromium through
//! the real binary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt as _;
use support::{Home, TOKEN};
use tower::ServiceExt as _;

const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

struct Page {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: String,
}

async fn send(home: &Home, request: Request<Body>) -> Page {
    let response = toren_server::app(home.state.clone())
        .oneshot(request)
        .await
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Page {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

fn cookie() -> String {
    format!("toren_session={}", hex::encode(TOKEN))
}

async fn get(home: &Home, path: &str, cookie: Option<&str>) -> Page {
    let mut request = Request::get(path);
    if let Some(cookie) = cookie {
        request = request.header(header::COOKIE, cookie);
    }
    send(home, request.body(Body::empty()).unwrap()).await
}

async fn sign_in(home: &Home, token: &str, tls: bool) -> Page {
    let mut request = Request::post("/ui/sign-in")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    if tls {
        request = request.header("x-forwarded-proto", "https");
    }
    let body = format!("token={}", token.replace('+', "%2B"));
    send(home, request.body(Body::from(body)).unwrap()).await
}

/// The CSRF token the page gives a signed-in caller.
fn csrf_of(page: &Page) -> String {
    let at = page
        .body
        .find("name=\"csrf\" content=\"")
        .expect("a csrf meta");
    let rest = &page.body[at + "name=\"csrf\" content=\"".len()..];
    rest[..rest.find('"').unwrap()].to_owned()
}

#[tokio::test]
async fn a_wrong_token_is_refused_and_the_right_one_sets_a_strict_http_only_cookie() {
    let home = Home::new().await;
    let refused = sign_in(&home, "not-the-token-at-all", false).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert!(refused.headers.get(header::SET_COOKIE).is_none());
    assert!(refused.body.contains("not valid"), "{}", refused.body);

    let accepted = sign_in(&home, TOKEN, false).await;
    assert_eq!(accepted.status, StatusCode::SEE_OTHER);
    assert_eq!(accepted.headers[header::LOCATION], "/ui/runs");
    let set = accepted.headers[header::SET_COOKIE].to_str().unwrap();
    assert_eq!(
        set,
        format!("{}; Path=/; HttpOnly; SameSite=Strict", cookie())
    );
    let over_tls = sign_in(&home, TOKEN, true).await;
    let set = over_tls.headers[header::SET_COOKIE].to_str().unwrap();
    assert!(set.ends_with("; Secure"), "{set}");
}

#[tokio::test]
async fn another_sites_page_cannot_sign_in_nor_post_with_the_cookie() {
    let home = Home::new().await;
    home.agent("quick", "turns:\n  - text: \"done\"\n", false);
    let sign_in_from = |headers: &[(&'static str, &'static str)]| {
        let mut request = Request::post("/ui/sign-in")
            .header(header::HOST, "127.0.0.1:7420")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request
            .body(Body::from(format!("token={}", TOKEN.replace('+', "%2B"))))
            .unwrap()
    };
    // Login CSRF: a form on another site posting the attacker's (valid) token.
    for headers in [
        &[("origin", "https://evil.example")][..],
        &[("origin", "null")],
        &[("sec-fetch-site", "cross-site")],
        &[
            ("sec-fetch-site", "same-site"),
            ("origin", "http://127.0.0.1:7420"),
        ],
    ] {
        let refused = send(&home, sign_in_from(headers)).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{headers:?}");
        assert!(
            refused.headers.get(header::SET_COOKIE).is_none(),
            "{headers:?}"
        );
        assert!(refused.body.contains("another site"), "{}", refused.body);
    }
    // The page's own form, as browsers send it, and a client that is no browser page.
    for headers in [
        &[("origin", "http://127.0.0.1:7420")][..],
        &[
            ("sec-fetch-site", "same-origin"),
            ("origin", "http://127.0.0.1:7420"),
        ],
        &[],
    ] {
        let accepted = send(&home, sign_in_from(headers)).await;
        assert_eq!(accepted.status, StatusCode::SEE_OTHER, "{headers:?}");
        assert!(accepted.headers.get(header::SET_COOKIE).is_some());
    }

    // With the visitor's cookie and even the right CSRF token, another site's request is
    // refused and creates nothing; reading from a link elsewhere still works.
    let csrf = csrf_of(&get(&home, "/ui/runs", Some(&cookie())).await);
    let create = |site: &'static str| {
        Request::post("/ui/api/runs")
            .header(header::COOKIE, cookie())
            .header(header::CONTENT_TYPE, "application/json")
            .header("x-csrf-token", csrf.clone())
            .header("sec-fetch-site", site)
            .body(Body::from(r#"{"agent":"quick","input":"hi"}"#))
            .unwrap()
    };
    let refused = send(&home, create("cross-site")).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    let listed = get(&home, "/ui/api/runs", Some(&cookie())).await;
    assert!(
        !listed.body.contains("\"agent\":\"quick\""),
        "{}",
        listed.body
    );
    let created = send(&home, create("same-origin")).await;
    assert_eq!(created.status, StatusCode::ACCEPTED, "{}", created.body);
    let mut linked = Request::get("/ui/runs")
        .header(header::COOKIE, cookie())
        .header("sec-fetch-site", "cross-site");
    linked = linked.header(header::HOST, "127.0.0.1:7420");
    let page = send(&home, linked.body(Body::empty()).unwrap()).await;
    assert_eq!(page.status, StatusCode::OK);
}

#[tokio::test]
async fn the_live_runs_stream_lists_a_run_created_after_it_opened() {
    let home = Home::new().await;
    home.agent("quick", "turns:\n  - text: \"done\"\n", false);
    let request = Request::get("/ui/live/runs")
        .header(header::COOKIE, cookie())
        .body(Body::empty())
        .unwrap();
    let response = toren_server::app(home.state.clone())
        .oneshot(request)
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body().into_data_stream();
    // Reads the stream until the next `runs` event; its data.
    async fn next_runs(
        body: &mut (impl futures::Stream<Item = Result<axum::body::Bytes, axum::Error>> + Unpin),
    ) -> String {
        use futures::StreamExt as _;
        let mut text = String::new();
        loop {
            let chunk = body.next().await.unwrap().unwrap();
            text.push_str(&String::from_utf8_lossy(&chunk));
            if let Some(at) = text.find("event: runs\ndata: ") {
                let data = &text[at + "event: runs\ndata: ".len()..];
                if let Some(end) = data.find('\n') {
                    return data[..end].to_owned();
                }
            }
        }
    }
    let first = next_runs(&mut body).await;
    assert_eq!(first, r#"{"pending":0,"runs":[]}"#);
    let created = home.create("quick", "hi").await.json();
    let id = created["id"].as_str().unwrap();
    let next = next_runs(&mut body).await;
    assert!(next.contains(id), "{next}");
}

#[tokio::test]
async fn without_the_cookie_only_the_sign_in_page_is_shown() {
    let home = Home::new().await;
    for path in [
        "/",
        "/ui/runs",
        "/ui/approvals",
        "/ui/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV",
        "/ui/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/files/a.txt",
        "/ui/sessions/notes",
        "/ui/live/runs",
    ] {
        for cookie in [
            None,
            Some("toren_session=00"),
            Some("toren_session=zz"),
            Some("other=1"),
        ] {
            let page = get(&home, path, cookie).await;
            assert_eq!(page.status, StatusCode::SEE_OTHER, "{path} {cookie:?}");
            assert_eq!(page.headers[header::LOCATION], "/ui/sign-in", "{path}");
        }
    }
    let api = get(&home, "/ui/api/runs", None).await;
    assert_eq!(api.status, StatusCode::UNAUTHORIZED);
    // The cookie is no bearer token for the API proper.
    let api = get(&home, "/runs", Some(&cookie())).await;
    assert_eq!(api.status, StatusCode::UNAUTHORIZED);

    let page = get(&home, "/ui/sign-in", None).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(page.headers[header::CONTENT_SECURITY_POLICY], CSP);
    assert!(!page.body.contains("<script>"), "no inline script");
}

/// The sign-in page tells a fresh user where their token is (the file `toren serve` wrote)
/// and names only environment variables that exist.
#[tokio::test]
async fn the_sign_in_page_names_the_token_file_and_only_real_variables() {
    let home = Home::new().await;
    let page = get(&home, "/ui/sign-in", None).await;
    assert!(page.body.contains("~/.toren/api-token"), "{}", page.body);
    assert!(page.body.contains("TOREN_API_TOKENS_FILE"), "{}", page.body);
    let mut named = Vec::new();
    let mut rest = page.body.as_str();
    while let Some(at) = rest.find("TOREN_") {
        let word: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        rest = &rest[at + word.len()..];
        named.push(word);
    }
    assert!(named.len() >= 3, "{named:?}");
    let unknown: Vec<&String> = named
        .iter()
        .filter(|n| toren_config::env_vars::lookup(n).is_none())
        .collect();
    assert!(unknown.is_empty(), "the page names {unknown:?}");
}

#[tokio::test]
async fn state_changing_requests_need_the_csrf_token_and_sign_out_clears_the_cookie() {
    let home = Home::new().await;
    home.agent("quick", "turns:\n  - text: \"done\"\n", false);
    let page = get(&home, "/ui/runs", Some(&cookie())).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(page.headers[header::CONTENT_SECURITY_POLICY], CSP);
    assert_eq!(page.headers[header::X_FRAME_OPTIONS], "DENY");
    let csrf = csrf_of(&page);

    let create = |csrf: Option<String>| {
        let mut request = Request::post("/ui/api/runs")
            .header(header::COOKIE, cookie())
            .header(header::CONTENT_TYPE, "application/json");
        if let Some(csrf) = csrf {
            request = request.header("x-csrf-token", csrf);
        }
        request
            .body(Body::from(r#"{"agent":"quick","input":"hi"}"#))
            .unwrap()
    };
    let refused = send(&home, create(None)).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    let refused = send(&home, create(Some("0".repeat(64)))).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let created = send(&home, create(Some(csrf.clone()))).await;
    assert_eq!(created.status, StatusCode::ACCEPTED, "{}", created.body);
    assert_eq!(
        created.headers[header::CONTENT_SECURITY_POLICY],
        "default-src 'none'; frame-ancestors 'none'; sandbox"
    );
    // Reading needs no CSRF token; the run is there, made by the page's caller.
    let listed = get(&home, "/ui/api/runs", Some(&cookie())).await;
    assert_eq!(listed.status, StatusCode::OK);
    assert!(
        listed.body.contains("\"agent\":\"quick\""),
        "{}",
        listed.body
    );

    let sign_out = |field: &str| {
        Request::post("/ui/sign-out")
            .header(header::COOKIE, cookie())
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(field.to_owned()))
            .unwrap()
    };
    let refused = send(&home, sign_out("csrf=nope")).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let out = send(&home, sign_out(&format!("csrf={csrf}"))).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert_eq!(out.headers[header::LOCATION], "/ui/sign-in");
    let set = out.headers[header::SET_COOKIE].to_str().unwrap();
    assert!(
        set.starts_with("toren_session=;") && set.contains("Max-Age=0"),
        "{set}"
    );
}

#[tokio::test]
async fn file_names_and_contents_from_a_run_are_text_not_markup() {
    let home = Home::new().await;
    home.agent(
        "writer",
        "turns:\n  - tool_calls:\n      - bash: {command: \"printf '<img src=x onerror=alert(1)>\\\\nline two\\\\n' > '<b>bold.txt'\"}\n  - text: \"done\"\n",
        true,
    );
    let run = home.create("writer", "go").await.json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let driving = home.spawn_drive(&run).await;
    let call = home.pending_call(&run).await;
    let reply = home
        .post(
            &format!("/runs/{run}/approvals/{call}"),
            serde_json::json!({"decision": "approve"}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    driving.await.unwrap();

    let listing = get(&home, &format!("/ui/runs/{run}/files/"), Some(&cookie())).await;
    assert_eq!(listing.status, StatusCode::OK, "{}", listing.body);
    assert!(
        listing.body.contains("&lt;b&gt;bold.txt"),
        "{}",
        listing.body
    );
    assert!(!listing.body.contains("<b>bold"), "{}", listing.body);
    assert!(
        listing.body.contains("href=\"/ui/runs/"),
        "{}",
        listing.body
    );
    assert!(listing.body.contains("%3Cb%3Ebold.txt"), "{}", listing.body);

    let file = get(
        &home,
        &format!("/ui/runs/{run}/files/%3Cb%3Ebold.txt"),
        Some(&cookie()),
    )
    .await;
    assert_eq!(file.status, StatusCode::OK, "{}", file.body);
    assert!(
        file.body
            .contains("<li>&lt;img src=x onerror=alert(1)&gt;</li><li>line two</li>"),
        "{}",
        file.body
    );
    assert!(!file.body.contains("<img src=x"), "{}", file.body);
}

/// The server-rendered pages show what a session's person and model said, a file's name
/// and its lines through toren-display: every hidden character as its marker, none raw.
#[tokio::test]
async fn session_chat_file_names_and_file_lines_show_hidden_characters_as_markers() {
    let home = Home::new().await;
    home.agent(
        "echo",
        "turns:\n  - tool_calls:\n      - write_file: {path: \"a\\u202Eb.txt\", content: \"one\\u200B\\ntwo\\u001B[2K\\n\"}\n  - text: \"done \\u2066here\"\n",
        true,
    );
    let created = home
        .post(
            "/sessions",
            serde_json::json!({"agent": "echo", "name": "chat"}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let sent = home
        .post(
            "/sessions/chat/messages",
            serde_json::json!({"text": "hi \u{202E}there"}),
        )
        .await;
    assert_eq!(sent.status, StatusCode::ACCEPTED, "{}", sent.text());
    let run = sent.json()["run"]["id"].as_str().unwrap().to_owned();
    home.drive(&run).await;

    let page = get(&home, "/ui/sessions/chat", Some(&cookie())).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("hi ⟨U+202E⟩there"), "{}", page.body);
    assert!(page.body.contains("done ⟨U+2066⟩here"), "{}", page.body);
    assert!(page.body.contains("a⟨U+202E⟩b.txt"), "{}", page.body);

    let file = get(
        &home,
        &format!("/ui/runs/{run}/files/a%E2%80%AEb.txt"),
        Some(&cookie()),
    )
    .await;
    assert_eq!(file.status, StatusCode::OK, "{}", file.body);
    assert!(
        file.body
            .contains("<li>one⟨U+200B⟩</li><li>two⟨ESC⟩[2K</li>"),
        "{}",
        file.body
    );
    assert!(
        file.body.contains("download=\"a⟨U+202E⟩b.txt\""),
        "{}",
        file.body
    );
    for page in [&page.body, &file.body] {
        for raw in ['\u{202E}', '\u{2066}', '\u{200B}', '\u{1B}'] {
            assert!(!page.contains(raw), "{raw:?} raw in {page}");
        }
    }
}
