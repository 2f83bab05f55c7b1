//! Requests from other sites: a request that changes anything (`POST` and the like) to a
//! page or to `/ui/api` is refused with 403 when the browser says it came from another
//! site, so a page elsewhere cannot sign a visitor in with the attacker's token (login
//! CSRF) nor post with the visitor's cookie (which `SameSite=Strict` and the CSRF token
//! already stop). The browser's own word decides: `Sec-Fetch-Site` when it sends it (every
//! current browser does), else `Origin` against the `Host` the request was sent to (or
//! `X-Forwarded-Host`, behind a proxy). A request with neither header is not a browser
//! page's (a script, `curl`) and is let through; reading requests always are.

use axum::extract::Request;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};

use crate::error::Problem;

/// Refuses a state-changing request that another site's page sent.
pub(super) async fn refuse_cross_site(request: Request, next: Next) -> Response {
    let reads = matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if !reads && let Some(why) = cross_site(request.headers()) {
        return Problem::new(
            StatusCode::FORBIDDEN,
            format!("this request came from another site ({why}); use the page of this server"),
        )
        .into_response();
    }
    next.run(request).await
}

/// Why the request came from another site, by the headers the browser set; `None`: it is
/// this site's own, or no browser page's.
pub(super) fn cross_site(headers: &HeaderMap) -> Option<String> {
    if let Some(site) = headers.get("sec-fetch-site") {
        return match site.to_str() {
            Ok("same-origin" | "none") => None,
            Ok(site) => Some(format!("Sec-Fetch-Site: {site}")),
            Err(_) => Some("an unreadable Sec-Fetch-Site".to_owned()),
        };
    }
    let origin = headers.get(header::ORIGIN)?;
    let origin = origin.to_str().unwrap_or("(unreadable)");
    let authority = origin.split_once("://").map(|(_, authority)| authority);
    let sent_to = [headers.get(header::HOST), headers.get("x-forwarded-host")];
    let same = authority.is_some_and(|authority| {
        sent_to
            .iter()
            .flatten()
            .filter_map(|host| host.to_str().ok())
            .any(|host| host.eq_ignore_ascii_case(authority))
    });
    (!same).then(|| format!("Origin: {origin}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn the_browsers_word_decides() {
        assert_eq!(cross_site(&headers(&[])), None);
        assert_eq!(
            cross_site(&headers(&[("sec-fetch-site", "same-origin")])),
            None
        );
        assert_eq!(cross_site(&headers(&[("sec-fetch-site", "none")])), None);
        for site in ["cross-site", "same-site"] {
            assert!(
                cross_site(&headers(&[("sec-fetch-site", site)])).is_some(),
                "{site}"
            );
        }
        let host = ("host", "127.0.0.1:7420");
        assert_eq!(
            cross_site(&headers(&[host, ("origin", "http://127.0.0.1:7420")])),
            None
        );
        assert_eq!(
            cross_site(&headers(&[
                ("host", "10.0.0.5:7420"),
                ("x-forwarded-host", "toren.example"),
                ("origin", "https://toren.example")
            ])),
            None
        );
        for origin in ["https://evil.example", "null", "http://127.0.0.1:7421"] {
            assert_eq!(
                cross_site(&headers(&[host, ("origin", origin)])),
                Some(format!("Origin: {origin}")),
                "{origin}"
            );
        }
        // Sec-Fetch-Site is the browser's own judgement and wins over a matching Origin.
        assert!(
            cross_site(&headers(&[
                host,
                ("origin", "http://127.0.0.1:7420"),
                ("sec-fetch-site", "cross-site")
            ]))
            .is_some()
        );
    }
}
