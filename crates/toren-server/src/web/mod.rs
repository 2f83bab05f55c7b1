//! The web page of `toren serve`: server-rendered HTML at `/` and `/ui/…`, a
//! static script and style sheet (`crates/toren-server/web/`, embedded), and the JSON API
//! again under `/ui/api/…` for the page's script — the same router and handlers, reached
//! with the sign-in cookie instead of a bearer header. No second source of truth: pages
//! read the run service as the API does, and the script only calls the API.
//!
//! Sign-in: `POST /ui/sign-in` with an API token sets the `toren_session` cookie (the token,
//! hex-encoded; `HttpOnly`, `SameSite=Strict`, `Secure` when the request came over TLS), so
//! it stays valid across server restarts for as long as the token does. Every
//! state-changing request (`POST` to `/ui/api/…`, the sign-out form) must carry the CSRF
//! token, derived from the session token (SHA-256 with a label), in `X-CSRF-Token` or the
//! `csrf` form field; and none of them, sign-in included, may come from another site's
//! page (`origin.rs`: `Sec-Fetch-Site`, else `Origin` against `Host`). Without a valid
//! cookie, a page redirects to the sign-in page and the API answers 401. Every response
//! carries a Content-Security-Policy that allows only this
//! origin's script and style (no inline script at all) and no framing; workspace files
//! reached through `/ui/api` are additionally sandboxed. What came from a model, a sandbox
//! or a file is shown through `toren_display`, on the server (`pages.rs`) and in the
//! page's script alike (`display.rs` gives the script toren-display's own table).

mod budget;
mod display;
mod html;
mod live;
mod origin;
mod pages;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{Next, from_fn, from_fn_with_state};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use sha2::Digest as _;
use subtle::ConstantTimeEq as _;

use crate::AppState;
use crate::auth::Caller;
use crate::error::Problem;

/// The session cookie's name.
const COOKIE: &str = "toren_session";

/// The pages' policy: this origin's script and style only, no inline script, no framing.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// The policy of what `/ui/api` serves (JSON, event streams, workspace files): nothing it
/// returns runs as a page of this origin, even an HTML file an agent wrote.
const API_CSP: &str = crate::files::SANDBOX_CSP;

const APP_JS: &str = include_str!("../../web/app.js");
const APP_CSS: &str = include_str!("../../web/app.css");

/// The web page's routes; `api` is the API's guarded router, served again under `/ui/api`.
pub(crate) fn router(state: AppState, api: Router<AppState>) -> Router<AppState> {
    let pages = Router::new()
        .route("/ui/runs", get(pages::runs))
        .route("/ui/runs/{id}", get(pages::run))
        .route("/ui/approvals", get(pages::approvals))
        .route("/ui/sessions/{key}", get(pages::session))
        .route("/ui/runs/{id}/files", get(pages::run_files_root))
        .route("/ui/runs/{id}/files/", get(pages::run_files_root))
        .route("/ui/runs/{id}/files/{*path}", get(pages::run_files))
        .route("/ui/sessions/{key}/files", get(pages::session_files_root))
        .route("/ui/sessions/{key}/files/", get(pages::session_files_root))
        .route(
            "/ui/sessions/{key}/files/{*path}",
            get(pages::session_files),
        )
        .route("/ui/live/runs", get(pages::live_runs))
        .route("/ui/sign-out", post(sign_out))
        .route_layer(from_fn_with_state(state.clone(), require_cookie_page));
    let api = Router::new()
        .nest("/ui/api", api)
        .route_layer(from_fn_with_state(state, require_cookie_api))
        .layer(from_fn(api_headers));
    Router::new()
        .route("/", get(root))
        .route("/ui", get(root))
        .route("/ui/", get(root))
        .route("/ui/sign-in", get(sign_in_page).post(sign_in))
        .route("/ui/static/display.js", get(display_js))
        .route("/ui/static/app.js", get(app_js))
        .route("/ui/static/app.css", get(app_css))
        .merge(pages)
        .layer(from_fn(page_headers))
        .merge(api)
        .layer(from_fn(origin::refuse_cross_site))
}

/// The CSRF token of a session token.
fn csrf_of(token: &str) -> String {
    let mut hash = sha2::Sha256::new();
    hash.update(b"toren-web-csrf\0");
    hash.update(token.as_bytes());
    hex::encode(hash.finalize())
}

/// The signed-in caller: the token's name and the session's CSRF token.
#[derive(Clone, Debug)]
pub(crate) struct Signed {
    pub(crate) name: String,
    pub(crate) csrf: String,
}

/// The token the cookie holds, if it is one of the server's.
fn signed_in(state: &AppState, headers: &HeaderMap) -> Option<Signed> {
    let presented = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .and_then(|(_, value)| hex::decode(value).ok())?;
    let mut matched = None;
    // Every token is compared, as the bearer check does.
    for token in state.tokens.iter() {
        if bool::from(token.secret.as_bytes().ct_eq(&presented)) {
            matched = Some(Signed {
                name: token.name.clone(),
                csrf: csrf_of(&token.secret),
            });
        }
    }
    matched
}

fn csrf_ok(signed: &Signed, presented: Option<&str>) -> bool {
    presented.is_some_and(|p| bool::from(p.as_bytes().ct_eq(signed.csrf.as_bytes())))
}

/// Pages: without a valid cookie, the sign-in page; the sign-out form needs its CSRF field
/// (checked in its handler, which reads the form).
async fn require_cookie_page(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    match signed_in(&state, request.headers()) {
        Some(signed) => {
            request.extensions_mut().insert(signed);
            next.run(request).await
        }
        None => Redirect::to("/ui/sign-in").into_response(),
    }
}

/// The API under `/ui/api`: the cookie stands for the bearer token; a request that changes
/// anything must also carry `X-CSRF-Token`.
async fn require_cookie_api(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Result<Response, Problem> {
    let signed = signed_in(&state, request.headers())
        .ok_or_else(|| Problem::unauthorized("sign in at /ui/sign-in"))?;
    let safe = matches!(*request.method(), Method::GET | Method::HEAD);
    let presented = request
        .headers()
        .get("x-csrf-token")
        .and_then(|v| v.to_str().ok());
    if !safe && !csrf_ok(&signed, presented) {
        return Err(Problem::new(
            StatusCode::FORBIDDEN,
            "send the page's CSRF token in X-CSRF-Token",
        ));
    }
    request.extensions_mut().insert(Caller(signed.name));
    Ok(next.run(request).await)
}

fn security_headers(response: &mut Response, csp: &'static str) {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(csp),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
}

async fn page_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    security_headers(&mut response, CSP);
    if !response.headers().contains_key(header::CACHE_CONTROL) {
        response
            .headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

async fn api_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    security_headers(&mut response, API_CSP);
    response
}

async fn root(State(state): State<AppState>, headers: HeaderMap) -> Redirect {
    match signed_in(&state, &headers) {
        Some(_) => Redirect::to("/ui/runs"),
        None => Redirect::to("/ui/sign-in"),
    }
}

async fn app_js() -> Response {
    asset(APP_JS, "text/javascript; charset=utf-8")
}

/// toren-display's rules for the page's script (`display.rs`).
async fn display_js() -> Response {
    asset(display::script(), "text/javascript; charset=utf-8")
}

async fn app_css() -> Response {
    asset(APP_CSS, "text/css; charset=utf-8")
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

async fn sign_in_page(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if signed_in(&state, &headers).is_some() {
        return Redirect::to("/ui/runs").into_response();
    }
    pages::sign_in(None, StatusCode::OK)
}

/// Whether the request came over TLS (directly, or through a proxy that says so).
fn over_tls(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("https"))
}

fn form_field(body: &[u8], field: &str) -> Option<String> {
    let body = std::str::from_utf8(body).ok()?;
    body.split('&').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        (name == field).then(|| form_decode(value))
    })
}

/// `application/x-www-form-urlencoded` value decoding (`+` is a space; a `%` not followed
/// by two hex digits stays as it is).
fn form_decode(value: &str) -> String {
    fn hex_digit(b: u8) -> Option<u8> {
        char::from(b)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    }
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let escaped = match (b, bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&hi), Some(&lo)) => hex_digit(hi).zip(hex_digit(lo)),
            _ => None,
        };
        match (b, escaped) {
            (_, Some((hi, lo))) => {
                out.push(hi * 16 + lo);
                i += 3;
            }
            (b'+', None) => {
                out.push(b' ');
                i += 1;
            }
            (b, None) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn sign_in(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let token = form_field(&body, "token").unwrap_or_default();
    let token = token.trim();
    let mut valid = false;
    for known in state.tokens.iter() {
        if bool::from(known.secret.as_bytes().ct_eq(token.as_bytes())) {
            valid = true;
        }
    }
    if !valid {
        return pages::sign_in(
            Some("That token is not valid for this server."),
            StatusCode::UNAUTHORIZED,
        );
    }
    let secure = if over_tls(&headers) { "; Secure" } else { "" };
    let cookie = format!(
        "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict{secure}",
        hex::encode(token)
    );
    let mut response = Redirect::to("/ui/runs").into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

async fn sign_out(
    axum::extract::Extension(signed): axum::extract::Extension<Signed>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let presented = form_field(&body, "csrf");
    if !csrf_ok(&signed, presented.as_deref()) {
        return Problem::new(
            StatusCode::FORBIDDEN,
            "the sign-out form's CSRF token is missing or wrong",
        )
        .into_response();
    }
    let secure = if over_tls(&headers) { "; Secure" } else { "" };
    let cookie = format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{secure}");
    let mut response = Redirect::to("/ui/sign-in").into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_values_are_decoded() {
        assert_eq!(
            form_field(b"a=1&token=x%2By+z", "token").as_deref(),
            Some("x+y z")
        );
        assert_eq!(form_field(b"token=%4", "token").as_deref(), Some("%4"));
        assert_eq!(form_field(b"token=%", "token").as_deref(), Some("%"));
        assert_eq!(form_field(b"other=1", "token"), None);
    }

    /// The run page's script listens only for the kinds in its `STATUS_AFTER` table: each
    /// kind the protocol has (the store's corpus holds one line of each, a test there
    /// checks) must be in it, or its events never show (as `rewound` once did not).
    #[test]
    fn the_run_page_listens_for_every_event_kind() {
        let corpus = include_str!("../../../toren-store/tests/corpus/v1_events.jsonl");
        let start = APP_JS.find("const STATUS_AFTER = {").unwrap();
        let table = &APP_JS[start..start + APP_JS[start..].find("};").unwrap()];
        let mut kinds: Vec<String> = corpus
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let event: serde_json::Value = serde_json::from_str(l).unwrap();
                event["type"].as_str().unwrap().to_owned()
            })
            .collect();
        kinds.sort();
        kinds.dedup();
        assert!(kinds.len() >= 17, "{kinds:?}");
        let missing: Vec<&String> = kinds
            .iter()
            .filter(|k| !table.contains(&format!("{k}:")))
            .collect();
        assert!(
            missing.is_empty(),
            "app.js's STATUS_AFTER lacks {missing:?}"
        );
    }
}
