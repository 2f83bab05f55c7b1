//! Workspace files over the API: `GET /runs/{id}/files/{*path}` and
//! `GET /sessions/{id}/files/{*path}`. A file comes back with a content type guessed from
//! its extension; a directory (or no path) as a JSON list of `{name, kind, size}`. The
//! workspace is the one pinned when the run or session was made, opened as a capability
//! ([`toren_sandbox::Workspace`]), and every path is resolved beneath it by the kernel, as
//! the tools' are: `..`, absolute paths and symlinks that lead out are refused, never
//! followed. Files over the tools' limit (10 MiB) are refused with 413. Every response
//! carrying a workspace's content is sandboxed by its Content-Security-Policy and marked
//! `nosniff` ([`SANDBOX_CSP`]), so a file the agent wrote never runs script in this origin.

use std::path::Path as FsPath;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use toren_protocol::EventKind;
use toren_sandbox::{EntryKind, Workspace};
use utoipa::ToSchema;

use crate::AppState;
use crate::error::Problem;
use crate::runs::run_id;
use crate::sessions::find_session;

/// The policy of every response that carries a workspace's content (here and under the web
/// page's `/ui/api`): the document is sandboxed (an opaque origin, no script, no forms) and
/// may load nothing, so an HTML or SVG file an agent wrote cannot run as a page of Toren's
/// origin, whichever front door served it.
pub(crate) const SANDBOX_CSP: &str = "default-src 'none'; frame-ancestors 'none'; sandbox";

/// The largest file served: the tools' own read limit.
pub(crate) const FILE_LIMIT: u64 = 10 * 1024 * 1024;

/// One entry of a directory listing.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = FileEntry)]
struct Entry {
    name: String,
    #[schema(inline)]
    kind: Kind,
    /// In bytes.
    size: u64,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
#[schema(as = FileKind)]
enum Kind {
    File,
    Directory,
    /// A symlink, a named pipe, a socket or a device: never served.
    Other,
}

/// A file's bytes, with the content type its extension gives.
#[derive(ToSchema)]
#[schema(value_type = String, format = Binary, as = FileContent)]
#[expect(dead_code, reason = "a schema only: files are served as bytes")]
struct Content(Vec<u8>);

/// The responses of a workspace's root.
#[derive(utoipa::IntoResponses)]
#[expect(
    dead_code,
    reason = "documentation only: the handlers answer through `serve`"
)]
enum RootResponses {
    /// The workspace's top directory.
    #[response(status = 200)]
    Listing(#[to_schema] Vec<Entry>),
}

/// The workspace's top directory of a run.
#[utoipa::path(
    get,
    path = "/runs/{id}/files",
    operation_id = "run_files",
    tag = "files",
    params(("id" = String, Path, description = "The run's id")),
    responses(
        RootResponses,
        (status = 404, description = "No such run, or it has no workspace"),
    )
)]
pub(crate) async fn run_root(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    serve(&run_workspace(&state, &id).await?, "").await
}

/// The same as `/runs/{id}/files`.
#[utoipa::path(
    get,
    path = "/runs/{id}/files/",
    operation_id = "run_files_slash",
    tag = "files",
    params(("id" = String, Path, description = "The run's id")),
    responses(
        RootResponses,
        (status = 404, description = "No such run, or it has no workspace"),
    )
)]
pub(crate) async fn run_root_slash(
    state: State<AppState>,
    id: Path<String>,
) -> Result<Response, Problem> {
    run_root(state, id).await
}

/// A file of a run's workspace, or a directory's listing.
#[utoipa::path(
    get,
    path = "/runs/{id}/files/{*path}",
    operation_id = "run_file",
    tag = "files",
    params(
        ("id" = String, Path, description = "The run's id"),
        ("path" = String, Path, description = "A path inside the workspace"),
    ),
    responses(
        (status = 200, description = "The file, with the content type its extension gives (`application/octet-stream` when none does); for a directory, its listing as a JSON array of `FileEntry`", content(
            (Content = "*/*"),
        )),
        (status = 400, description = "The path leads out of the workspace or is not valid"),
        (status = 404, description = "No such run, file or workspace"),
        (status = 413, description = "The file is over 10 MiB"),
        (status = 422, description = "Neither a regular file nor a directory"),
    )
)]
pub(crate) async fn run_file(
    State(state): State<AppState>,
    Path((id, path)): Path<(String, String)>,
) -> Result<Response, Problem> {
    serve(&run_workspace(&state, &id).await?, &path).await
}

/// The workspace's top directory of a session.
#[utoipa::path(
    get,
    path = "/sessions/{id}/files",
    operation_id = "session_files",
    tag = "files",
    params(("id" = String, Path, description = "The session's id (`ses_…`) or name")),
    responses(
        RootResponses,
        (status = 404, description = "No such session, or it has no workspace"),
    )
)]
pub(crate) async fn session_root(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    serve(&session_workspace(&state, &id).await?, "").await
}

/// The same as `/sessions/{id}/files`.
#[utoipa::path(
    get,
    path = "/sessions/{id}/files/",
    operation_id = "session_files_slash",
    tag = "files",
    params(("id" = String, Path, description = "The session's id (`ses_…`) or name")),
    responses(
        RootResponses,
        (status = 404, description = "No such session, or it has no workspace"),
    )
)]
pub(crate) async fn session_root_slash(
    state: State<AppState>,
    id: Path<String>,
) -> Result<Response, Problem> {
    session_root(state, id).await
}

/// A file of a session's workspace, or a directory's listing.
#[utoipa::path(
    get,
    path = "/sessions/{id}/files/{*path}",
    operation_id = "session_file",
    tag = "files",
    params(
        ("id" = String, Path, description = "The session's id (`ses_…`) or name"),
        ("path" = String, Path, description = "A path inside the workspace"),
    ),
    responses(
        (status = 200, description = "The file, with the content type its extension gives (`application/octet-stream` when none does); for a directory, its listing as a JSON array of `FileEntry`", content(
            (Content = "*/*"),
        )),
        (status = 400, description = "The path leads out of the workspace or is not valid"),
        (status = 404, description = "No such session, file or workspace"),
        (status = 413, description = "The file is over 10 MiB"),
        (status = 422, description = "Neither a regular file nor a directory"),
    )
)]
pub(crate) async fn session_file(
    State(state): State<AppState>,
    Path((id, path)): Path<(String, String)>,
) -> Result<Response, Problem> {
    serve(&session_workspace(&state, &id).await?, &path).await
}

/// The host path of the workspace pinned in the run's `run_created`.
pub(crate) async fn run_workspace(state: &AppState, id: &str) -> Result<String, Problem> {
    let run = run_id(id)?;
    let first = state.service.events(&run, 0).await?;
    let pinned = first.into_iter().find_map(|e| match e.kind {
        EventKind::RunCreated(created) => Some(created.policy.and_then(|p| p.workspace)),
        _ => None,
    });
    match pinned {
        None => Err(Problem::not_found(format!("no run {id}"))),
        Some(None) => Err(Problem::not_found(format!("run {id} has no workspace"))),
        Some(Some(path)) => Ok(path),
    }
}

pub(crate) async fn session_workspace(state: &AppState, id: &str) -> Result<String, Problem> {
    let session = find_session(state, id).await?;
    session
        .policy
        .and_then(|p| p.workspace)
        .ok_or_else(|| Problem::not_found(format!("session {id} has no workspace")))
}

/// Serves `path` of the workspace at `root`, off the async threads (file I/O blocks).
async fn serve(root: &str, path: &str) -> Result<Response, Problem> {
    let root = root.to_owned();
    let path = path.trim_end_matches('/').to_owned();
    tokio::task::spawn_blocking(move || serve_blocking(&root, &path))
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "a workspace read panicked");
            Problem::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the server could not read the file; its log says why",
            )
        })?
}

fn serve_blocking(root: &str, path: &str) -> Result<Response, Problem> {
    let workspace = Workspace::open_path(FsPath::new(root)).map_err(|e| {
        tracing::warn!(error = %e, "a pinned workspace cannot be opened");
        Problem::not_found("the workspace is gone")
    })?;
    let is_dir = path.is_empty()
        || path == "."
        || workspace.metadata(path).map_err(|e| problem(path, e))?.kind == EntryKind::Directory;
    if is_dir {
        let entries: Vec<Entry> = workspace
            .list(path)
            .map_err(|e| problem(path, e))?
            .into_iter()
            .map(|(name, info)| Entry {
                name,
                kind: match info.kind {
                    EntryKind::File => Kind::File,
                    EntryKind::Directory => Kind::Directory,
                    EntryKind::Other => Kind::Other,
                },
                size: info.len,
            })
            .collect();
        return Ok(sandboxed(Json(entries).into_response()));
    }
    let bytes = workspace
        .read(path, FILE_LIMIT)
        .map_err(|e| problem(path, e))?;
    let guessed = mime_guess::from_path(path).first_or_octet_stream();
    let mut response = bytes.into_response();
    if let Ok(value) = HeaderValue::from_str(guessed.essence_str()) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    Ok(sandboxed(response))
}

/// `response` with the headers that keep a workspace's content from acting in this origin:
/// [`SANDBOX_CSP`], and `nosniff` so the type given is the type used.
fn sandboxed(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(SANDBOX_CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// The client's view of why `path` cannot be served: the sandbox's messages name only the
/// path the client gave, never the host's.
pub(crate) fn problem(path: &str, error: toren_sandbox::Error) -> Problem {
    use toren_sandbox::Error as E;
    match error {
        E::PathEscape { .. } | E::InvalidPath { .. } => {
            Problem::new(StatusCode::BAD_REQUEST, error.to_string())
        }
        E::NotFound { .. } => {
            Problem::not_found(format!("`{path}` does not exist in the workspace"))
        }
        E::TooLarge { size, limit, .. } => Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("`{path}` is {size} bytes; files over {limit} bytes are not served"),
        ),
        E::NotAFile { .. } | E::IsDirectory { .. } => {
            Problem::new(StatusCode::UNPROCESSABLE_ENTITY, error.to_string())
        }
        other => {
            tracing::warn!(path, error = %other, "a workspace file cannot be served");
            Problem::not_found(format!("`{path}` cannot be read"))
        }
    }
}
