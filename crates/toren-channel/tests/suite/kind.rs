//! Images are told from documents by their content, whatever their name says.

use pretty_assertions::assert_eq;
use toren_channel::{Delivery, FileKind, ImageFormat};
use toren_protocol::RunId;

/// The first bytes of a file of each format (enough for its signature).
pub(crate) const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0";
const JPEG: &[u8] = b"\xff\xd8\xff\xe0\0\x10JFIF\0\x01\x01\0\0\x01\0\x01\0\0";
const GIF: &[u8] = b"GIF89a\x01\0\x01\0\x80\0\0\0\0\0\xff\xff\xff!\xf9\x04";
const WEBP: &[u8] = b"RIFF\x1a\0\0\0WEBPVP8L\x0d\0\0\0/\0\0\0";
const PDF: &[u8] = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n";

#[test]
fn images_by_content_documents_otherwise() {
    let cases: Vec<(&str, &[u8], FileKind)> = vec![
        ("chart.png", PNG, FileKind::Image(ImageFormat::Png)),
        ("photo.jpg", JPEG, FileKind::Image(ImageFormat::Jpeg)),
        ("anim.gif", GIF, FileKind::Image(ImageFormat::Gif)),
        ("pic.webp", WEBP, FileKind::Image(ImageFormat::Webp)),
        // The content decides: a PNG under another name is an image...
        ("chart.bin", PNG, FileKind::Image(ImageFormat::Png)),
        // ...and text or a PDF named like an image is a document.
        ("fake.png", b"not a picture\n", FileKind::Document),
        ("report.pdf", PDF, FileKind::Document),
        ("notes.txt", b"hello\n", FileKind::Document),
        ("empty.png", b"", FileKind::Document),
    ];
    let got: Vec<(&str, FileKind)> = cases
        .iter()
        .map(|(name, bytes, _)| {
            let delivery = Delivery::new(RunId::new(), "c1", *name, bytes.to_vec(), None);
            (*name, delivery.kind())
        })
        .collect();
    let want: Vec<(&str, FileKind)> = cases.iter().map(|(n, _, k)| (*n, *k)).collect();
    assert_eq!(got, want);
    assert_eq!(FileKind::Image(ImageFormat::Webp).as_str(), "image");
    assert_eq!(FileKind::Document.as_str(), "document");
    assert_eq!(ImageFormat::Jpeg.media_type(), "image/jpeg");
}

#[test]
fn a_delivery_carries_its_digest_and_size() {
    let delivery = Delivery::new(
        RunId::new(),
        "c1",
        "a.txt",
        b"abc".to_vec(),
        Some("x".into()),
    );
    assert_eq!(
        delivery.sha256(),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(delivery.len(), 3);
    assert_eq!(delivery.caption(), Some("x"));
    // Debug never dumps the bytes.
    assert!(format!("{delivery:?}").contains("bytes: 3"));
}
