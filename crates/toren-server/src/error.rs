//! Errors as `application/problem+json` (RFC 9457): a status, a short title and a detail
//! a client can act on, never a stack or a path of the server's.

use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// An error response (RFC 9457), as `application/problem+json`. Some carry extra members,
/// e.g. `decision`: the decision that stands, on a 409 to a second decision.
#[derive(Debug, Clone, Serialize, thiserror::Error, utoipa::ToSchema)]
#[error("{status} {title}: {detail}")]
pub struct Problem {
    /// `about:blank`: the status says what kind of problem it is.
    #[serde(rename = "type")]
    pub kind: String,
    /// The status's reason phrase, e.g. `Not Found`.
    pub title: String,
    /// The HTTP status code.
    #[schema(minimum = 400, maximum = 599)]
    pub status: u16,
    /// What went wrong, in words a client can act on.
    pub detail: String,
    /// Extra members (e.g. the decision that stands).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    #[schema(ignore)]
    pub extra: Option<serde_json::Map<String, serde_json::Value>>,
}

impl Problem {
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Self {
            kind: "about:blank".to_owned(),
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            status: status.as_u16(),
            detail: detail.into(),
            extra: None,
        }
    }

    pub(crate) fn unauthorized(detail: &str) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, detail)
    }

    pub(crate) fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, detail)
    }

    pub(crate) fn with(mut self, extra: serde_json::Map<String, serde_json::Value>) -> Self {
        self.extra = Some(extra);
        self
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, Json(&self)).into_response();
        if let Ok(value) = header::HeaderValue::from_str("application/problem+json") {
            response.headers_mut().insert(header::CONTENT_TYPE, value);
        }
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

impl From<JsonRejection> for Problem {
    fn from(rejection: JsonRejection) -> Self {
        let status = match rejection {
            JsonRejection::JsonDataError(_) => StatusCode::UNPROCESSABLE_ENTITY,
            JsonRejection::MissingJsonContentType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            _ => rejection.status(),
        };
        // axum's text names the field and the position, not anything of the server's.
        Self::new(status, rejection.body_text())
    }
}

impl From<QueryRejection> for Problem {
    fn from(rejection: QueryRejection) -> Self {
        Self::new(StatusCode::BAD_REQUEST, rejection.body_text())
    }
}

impl From<toren_runtime::Error> for Problem {
    fn from(error: toren_runtime::Error) -> Self {
        use toren_store::Error as S;
        let status = match &error {
            toren_runtime::Error::Store(S::RunNotFound(_))
            | toren_runtime::Error::Store(S::SessionNotFound(_))
            | toren_runtime::Error::Store(S::NoPendingApproval { .. })
            | toren_runtime::Error::NoRunMatches { .. }
            | toren_runtime::Error::NoPendingApproval { .. } => StatusCode::NOT_FOUND,
            toren_runtime::Error::Store(S::AlreadyDecided { .. })
            | toren_runtime::Error::Store(S::LeftBehind { .. })
            | toren_runtime::Error::Store(S::RunEnded { .. }) => StatusCode::CONFLICT,
            toren_runtime::Error::SandboxesDisabled { .. }
            | toren_runtime::Error::HostAskUnsupported { .. }
            | toren_runtime::Error::SecretsUnset { .. }
            | toren_runtime::Error::NoSuchLimit { .. }
            | toren_runtime::Error::NothingToRaise { .. }
            | toren_runtime::Error::BadSessionName { .. }
            | toren_runtime::Error::ReservedSessionName { .. }
            | toren_runtime::Error::Worker(toren_worker::Error::Seed { .. }) => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            e if e.is_refusal() => StatusCode::CONFLICT,
            // The docker daemon did not answer: the rewind can be asked again once it does.
            toren_runtime::Error::Worker(toren_worker::Error::SandboxUnreachable { .. }) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            _ => {
                tracing::error!(error = %error, "request failed");
                return Self::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "the server could not complete the request; its log says why",
                );
            }
        };
        Self::new(status, error.to_string())
    }
}

/// The longest rejection text kept as a problem's detail.
const DETAIL_LIMIT: usize = 1024;

/// Every error the server answers is a problem document: an error response in plain text
/// (an extractor's rejection — a path segment that is not valid UTF-8, a query or a body
/// that does not parse, a body over the limit — which axum answers as `text/plain`) or
/// with no body type is rewritten into one with the same status, its text as the detail.
/// Handlers' own problems pass untouched, and so does a page meant for a person (the
/// sign-in page refusing a token is HTML with 401).
pub(crate) async fn rejections_as_problems(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let plain = response
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap_or_default())
        .is_none_or(|v| v.starts_with("text/plain"));
    if !plain {
        return response;
    }
    let (parts, body) = response.into_parts();
    // A rejection's text is a sentence; anything longer than the limit is not read.
    let text = match axum::body::to_bytes(body, DETAIL_LIMIT * 4).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_owned(),
        Err(_) => String::new(),
    };
    let mut detail: String = text.chars().take(DETAIL_LIMIT).collect();
    if detail.is_empty() {
        detail = status
            .canonical_reason()
            .unwrap_or("the request was refused")
            .to_owned();
    }
    let mut problem = Problem::new(status, detail).into_response();
    // Headers the refusal set (`Allow`, `WWW-Authenticate`, …) stay; the body's own go.
    let kept = |name: &header::HeaderName| {
        *name != header::CONTENT_TYPE && *name != header::CONTENT_LENGTH
    };
    let headers = problem.headers_mut();
    for name in parts.headers.keys().filter(|n| kept(n)) {
        headers.remove(name);
    }
    for (name, value) in parts.headers.iter().filter(|(n, _)| kept(n)) {
        headers.append(name.clone(), value.clone());
    }
    problem
}

/// Any path the API does not have.
pub(crate) async fn not_found() -> Problem {
    Problem::not_found("no such route")
}

/// A method a path does not have (axum adds the `Allow` header).
pub(crate) async fn method_not_allowed() -> Problem {
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "this path does not have that method; `Allow` lists the ones it has",
    )
}
