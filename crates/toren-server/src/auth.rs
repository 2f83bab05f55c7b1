//! Bearer tokens: each request names one of the configured tokens, compared in constant
//! time; the token's name is who the request acts as.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use subtle::ConstantTimeEq as _;

use crate::AppState;
use crate::error::Problem;

/// A token a client may present, and the name the requests made with it act as.
#[derive(Clone)]
pub struct Token {
    pub name: String,
    pub secret: String,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Who made a request (the name of its token), for handlers that record it.
#[derive(Clone, Debug)]
pub(crate) struct Caller(pub(crate) String);

/// Refuses a request without a valid `Authorization: Bearer <token>` with 401.
pub(crate) async fn require_token(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Result<Response, Problem> {
    let presented = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| Problem::unauthorized("send `Authorization: Bearer <token>`"))?;
    // Every token is compared, so the time taken says nothing about which one matched.
    let mut matched = None;
    for token in state.tokens.iter() {
        if bool::from(token.secret.as_bytes().ct_eq(presented.as_bytes())) {
            matched = Some(token.name.clone());
        }
    }
    let name = matched.ok_or_else(|| Problem::unauthorized("the bearer token is not valid"))?;
    request.extensions_mut().insert(Caller(name));
    Ok(next.run(request).await)
}
