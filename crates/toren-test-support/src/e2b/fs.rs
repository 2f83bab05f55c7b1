//! The fake envd's file side: `/files` GET (the bytes of a file, 400 for a directory, 404
//! when missing) and POST (an `application/octet-stream` body written to `path`, parents
//! made; 403 on the read-only image, 507 when the disk is full), and the `filesystem.Filesystem` unary calls `Stat`,
//! `MakeDir` and `Remove`, each on the sandbox's disk as `Disk::host_path` maps paths.

use std::io;

use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::envd::{Target, connect_error, plain_error};

fn entry_json(path: &str, host: &std::path::Path) -> io::Result<Value> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = std::fs::symlink_metadata(host)?;
    let kind = if meta.file_type().is_symlink() {
        "FILE_TYPE_SYMLINK"
    } else if meta.is_dir() {
        "FILE_TYPE_DIRECTORY"
    } else {
        "FILE_TYPE_FILE"
    };
    let mut entry = json!({
        "name": path.rsplit('/').next().unwrap_or(path),
        "type": kind,
        "path": path,
        "size": meta.len().to_string(),
        "mode": meta.permissions().mode() & 0o7777,
        "owner": if meta.uid() == 0 { "root" } else { "user" },
        "group": if meta.gid() == 0 { "root" } else { "user" },
    });
    if let Ok(target) = std::fs::read_link(host) {
        entry["symlinkTarget"] = json!(target.display().to_string());
    }
    Ok(entry)
}

pub(super) fn filesystem(target: &Target, method: &str, body: &[u8]) -> Response {
    let Ok(request) = serde_json::from_slice::<Value>(body) else {
        return connect_error("invalid_argument", "the body is not JSON");
    };
    let path = request["path"].as_str().unwrap_or_default().to_owned();
    let Some((host, writable)) = target.disk.host_path(&path) else {
        return connect_error("invalid_argument", &format!("invalid path '{path}'"));
    };
    let io_error = |e: io::Error| match e.kind() {
        io::ErrorKind::NotFound => connect_error("not_found", &format!("path '{path}' not found")),
        io::ErrorKind::AlreadyExists => {
            connect_error("already_exists", &format!("'{path}' already exists"))
        }
        _ => connect_error("internal", &e.to_string()),
    };
    match method {
        "/filesystem.Filesystem/Stat" => match entry_json(&path, &host) {
            Ok(entry) => axum::Json(json!({"entry": entry})).into_response(),
            Err(e) => io_error(e),
        },
        "/filesystem.Filesystem/MakeDir" if writable => {
            if host.exists() {
                return io_error(io::ErrorKind::AlreadyExists.into());
            }
            match std::fs::create_dir_all(&host).and_then(|()| entry_json(&path, &host)) {
                Ok(entry) => axum::Json(json!({"entry": entry})).into_response(),
                Err(e) => io_error(e),
            }
        }
        "/filesystem.Filesystem/Remove" if writable => {
            let removed = if host.is_dir() {
                std::fs::remove_dir_all(&host)
            } else {
                std::fs::remove_file(&host)
            };
            match removed {
                Ok(()) => axum::Json(json!({})).into_response(),
                Err(e) => io_error(e),
            }
        }
        "/filesystem.Filesystem/MakeDir" | "/filesystem.Filesystem/Remove" => {
            connect_error("permission_denied", &format!("'{path}' is read-only"))
        }
        other => connect_error("unimplemented", &format!("{other} is not served here")),
    }
}

fn query_path(uri: &Uri) -> Option<String> {
    let query = uri.query()?;
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == "path").then(|| super::control::percent_decode(v))
    })
}

pub(super) fn download(target: &Target, uri: &Uri) -> Response {
    let Some(path) = query_path(uri) else {
        return plain_error(400, "path is required");
    };
    let Some((host, _)) = target.disk.host_path(&path) else {
        return plain_error(400, &format!("invalid path '{path}'"));
    };
    if host.is_dir() {
        return plain_error(400, &format!("path '{path}' is a directory"));
    }
    match std::fs::read(&host) {
        Ok(bytes) => ([("content-type", "application/octet-stream")], bytes).into_response(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            plain_error(404, &format!("path '{path}' does not exist"))
        }
        Err(e) => plain_error(500, &e.to_string()),
    }
}

pub(super) fn upload(target: &Target, uri: &Uri, headers: &HeaderMap, body: &[u8]) -> Response {
    if headers.get("content-type").and_then(|v| v.to_str().ok()) != Some("application/octet-stream")
    {
        return plain_error(400, "this envd takes application/octet-stream uploads only");
    }
    let Some(path) = query_path(uri) else {
        return plain_error(400, "path is required for an octet-stream upload");
    };
    let Some((host, writable)) = target.disk.host_path(&path) else {
        return plain_error(400, &format!("invalid path '{path}'"));
    };
    if !writable {
        return plain_error(403, &format!("'{path}' is read-only"));
    }
    let written = host
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&host, body));
    match written {
        Ok(()) => axum::Json(json!([{"path": path, "name": path.rsplit('/').next().unwrap_or(&path), "type": "file"}])).into_response(),
        // Out of disk or inodes: envd's 507.
        Err(e) if e.kind() == io::ErrorKind::StorageFull || e.raw_os_error() == Some(122) => {
            plain_error(507, &format!("not enough disk space to write '{path}': {e}"))
        }
        Err(e) => plain_error(500, &e.to_string()),
    }
}
