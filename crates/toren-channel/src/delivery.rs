//! What a channel is asked to deliver ([`Delivery`]: the file, its kind, its caption and the
//! idempotency key) and what it answers ([`Delivered`]). A file's kind is sniffed from its
//! content: an image is what a chat can show as a picture (PNG, JPEG, GIF, WebP), anything
//! else is a document. The extension is not trusted: a `.png` that holds no PNG would be
//! refused as a photo, so it travels as a document.

use std::fmt;

use sha2::{Digest, Sha256};
use toren_protocol::RunId;

/// An image format a chat shows as a picture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageFormat {
    Png,
    Jpeg,
    Gif,
    Webp,
}

impl ImageFormat {
    /// The format's media type, e.g. `image/png`.
    pub fn media_type(self) -> &'static str {
        match self {
            Self::Png => "image/png",
            Self::Jpeg => "image/jpeg",
            Self::Gif => "image/gif",
            Self::Webp => "image/webp",
        }
    }
}

/// How a channel should present a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// Shown as a picture (a Telegram photo).
    Image(ImageFormat),
    /// Any other file (a Telegram document).
    Document,
}

impl FileKind {
    /// The kind of a file with these contents, by their signature.
    pub fn sniff(bytes: &[u8]) -> Self {
        let format = match infer::get(bytes).map(|kind| kind.mime_type()) {
            Some("image/png") => ImageFormat::Png,
            Some("image/jpeg") => ImageFormat::Jpeg,
            Some("image/gif") => ImageFormat::Gif,
            Some("image/webp") => ImageFormat::Webp,
            _ => return Self::Document,
        };
        Self::Image(format)
    }

    /// `image` or `document`, as journaled.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Image(_) => "image",
            Self::Document => "document",
        }
    }
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One file to hand to the person.
#[derive(Clone, PartialEq, Eq)]
pub struct Delivery {
    run_id: RunId,
    call_id: String,
    name: String,
    bytes: Vec<u8>,
    kind: FileKind,
    sha256: String,
    caption: Option<String>,
}

impl Delivery {
    /// The file `name` (a file name, not a path) with `bytes`, sent by the call `call_id`
    /// of `run_id`. Its kind and SHA-256 are computed here.
    pub fn new(
        run_id: RunId,
        call_id: impl Into<String>,
        name: impl Into<String>,
        bytes: Vec<u8>,
        caption: Option<String>,
    ) -> Self {
        Self {
            run_id,
            call_id: call_id.into(),
            name: name.into(),
            kind: FileKind::sniff(&bytes),
            sha256: hex::encode(Sha256::digest(&bytes)),
            bytes,
            caption,
        }
    }

    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }

    /// The tool call that sends it: with the run id, the key that identifies this delivery
    /// when the call is run again.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The file's name, as the agent gave it (a channel makes it safe for its own use).
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The size in bytes.
    pub fn len(&self) -> u64 {
        u64::try_from(self.bytes.len()).unwrap_or(u64::MAX)
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn kind(&self) -> FileKind {
        self.kind
    }

    /// The SHA-256 of the bytes, in lowercase hex.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    pub fn caption(&self) -> Option<&str> {
        self.caption.as_deref()
    }
}

impl fmt::Debug for Delivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("run_id", &self.run_id)
            .field("call_id", &self.call_id)
            .field("name", &self.name)
            .field("bytes", &self.bytes.len())
            .field("kind", &self.kind)
            .field("sha256", &self.sha256)
            .field("caption", &self.caption)
            .finish()
    }
}

/// What the person got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivered {
    /// Where it is, in the channel's terms, as journaled: the path on disk (terminal), a
    /// message id (Telegram).
    pub receipt: String,
    /// What the agent is told of it, without the host's paths: e.g. "saved as `report-1.pdf`
    /// in the person's downloads folder".
    pub summary: String,
    /// The channel had delivered this call before (the call was run again after a crash)
    /// and did not deliver it again; `receipt` is the first delivery's.
    pub repeated: bool,
}
