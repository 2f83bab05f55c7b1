//! Just enough of `multipart/form-data` (RFC 7578) to read what a Bot API client uploads:
//! each part's field name, file name and bytes.

/// One part of a multipart body: a file when `filename` is set, else a text field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upload {
    pub field: String,
    pub filename: Option<String>,
    pub content_type: Option<String>,
    pub bytes: Vec<u8>,
}

/// The parts of `body` sent with `content_type` (which names the boundary). Malformed parts
/// are left out.
pub(crate) fn parse(content_type: &str, body: &[u8]) -> Vec<Upload> {
    let Some(boundary) = content_type
        .split(';')
        .map(str::trim)
        .find_map(|p| p.strip_prefix("boundary="))
    else {
        return Vec::new();
    };
    let boundary = boundary.trim_matches('"');
    let delimiter = format!("--{boundary}").into_bytes();
    let mut parts = Vec::new();
    let mut rest = body;
    // Skip the preamble up to the first delimiter.
    let Some(start) = find(rest, &delimiter) else {
        return parts;
    };
    rest = &rest[start + delimiter.len()..];
    loop {
        if rest.starts_with(b"--") {
            break;
        }
        let rest_after_crlf = rest.strip_prefix(b"\r\n").unwrap_or(rest);
        let Some(end) = find(rest_after_crlf, &delimiter) else {
            break;
        };
        let part = &rest_after_crlf[..end];
        let part = part.strip_suffix(b"\r\n").unwrap_or(part);
        if let Some(upload) = parse_part(part) {
            parts.push(upload);
        }
        rest = &rest_after_crlf[end + delimiter.len()..];
    }
    parts
}

fn parse_part(part: &[u8]) -> Option<Upload> {
    let split = find(part, b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&part[..split]);
    let bytes = part[split + 4..].to_vec();
    let mut field = None;
    let mut filename = None;
    let mut content_type = None;
    for line in head.split("\r\n") {
        let (name, value) = line.split_once(':')?;
        match name.trim().to_ascii_lowercase().as_str() {
            "content-disposition" => {
                for param in value.split(';').map(str::trim) {
                    if let Some(v) = param.strip_prefix("name=") {
                        field = Some(v.trim_matches('"').to_owned());
                    } else if let Some(v) = param.strip_prefix("filename=") {
                        filename = Some(v.trim_matches('"').to_owned());
                    }
                }
            }
            "content-type" => content_type = Some(value.trim().to_owned()),
            _ => {}
        }
    }
    Some(Upload {
        field: field?,
        filename,
        content_type,
        bytes,
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
