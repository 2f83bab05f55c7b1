use std::sync::Arc;
use std::time::{Duration, Instant};

use toren_channel::{ChannelError, ChannelFactory, Delivery};
use toren_protocol::{ChannelBinding, RunId};
use toren_store::{ChatStore, SqliteStore};
use toren_telegram::{BotApi, TelegramChannels};
use toren_test_support::telegram::FakeTelegram;

const TOKEN: &str = "123456:secret-token-value";

#[tokio::test]
async fn a_429_is_waited_out_for_its_retry_after() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let api = BotApi::new(&fake.url(), TOKEN).unwrap();
    fake.rate_limit("sendMessage", 1, 1);
    let started = Instant::now();
    let id = api.send_message(7, "hello", false, None).await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "waited retry_after"
    );
    let calls = fake.calls_of("sendMessage");
    assert_eq!(
        calls.iter().map(|c| c.status).collect::<Vec<_>>(),
        [429, 200]
    );
    assert_eq!(fake.message(7, id).unwrap().text, "hello");
}

#[tokio::test]
async fn updates_are_long_polled_and_confirmed_by_the_offset() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let api = BotApi::new(&fake.url(), TOKEN).unwrap();
    let first = fake.send_text(5, "one");
    let updates = api.get_updates(0, Duration::from_secs(1)).await.unwrap();
    assert_eq!(updates.len(), 1);
    assert_eq!(
        updates[0].message.as_ref().unwrap().text.as_deref(),
        Some("one")
    );
    // Nothing new: the poll waits its timeout, then answers empty.
    let started = Instant::now();
    let none = api
        .get_updates(first + 1, Duration::from_secs(1))
        .await
        .unwrap();
    assert!(none.is_empty());
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert_eq!(fake.confirmed(), first + 1);
}

#[tokio::test]
async fn errors_never_show_the_token() {
    // Nothing listens on this port.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let api = BotApi::new(&url, TOKEN).unwrap();
    let error = api.send_message(1, "x", false, None).await.unwrap_err();
    let shown = format!("{error} / {error:?} / {api:?}");
    assert!(!shown.contains("secret-token-value"), "{shown}");
    let fake = FakeTelegram::start("999:other").unwrap();
    let api = BotApi::new(&fake.url(), TOKEN).unwrap();
    let error = api.typing(1).await.unwrap_err();
    assert!(error.is_unauthorized(), "{error}");
    assert!(!format!("{error:?}").contains("secret-token-value"));
}

/// A store for the delivery ledger, in a temporary directory.
#[expect(
    clippy::unwrap_used,
    reason = "a test's helper: a failure fails the test"
)]
async fn ledger() -> (tempfile::TempDir, Arc<dyn ChatStore>) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("toren.db").display());
    let store = SqliteStore::open(&url).await.unwrap();
    (dir, Arc::new(store))
}

fn png() -> Vec<u8> {
    let mut bytes =
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89".to_vec();
    bytes.extend_from_slice(&[0u8; 64]);
    bytes
}

#[tokio::test]
async fn the_channel_sends_photos_and_documents_byte_for_byte_once() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let (_dir, ledger) = ledger().await;
    let channels = TelegramChannels::new(BotApi::new(&fake.url(), TOKEN).unwrap(), ledger);
    let run = RunId::new();
    let binding = ChannelBinding {
        kind: "telegram".into(),
        address: "77".into(),
    };
    let channel = channels.channel(&run, &binding).unwrap();
    let photo = Delivery::new(
        run.clone(),
        "call_1",
        "chart.dat",
        png(),
        Some("the chart".into()),
    );
    let delivered = channel.deliver(&photo).await.unwrap();
    assert!(!delivered.repeated);
    let document = Delivery::new(
        run.clone(),
        "call_2",
        "notes.png",
        b"not a png".to_vec(),
        None,
    );
    channel.deliver(&document).await.unwrap();
    let messages = fake.messages(77);
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0].kind, "photo");
    assert_eq!(messages[0].text, "the chart");
    assert_eq!(messages[0].upload.as_ref().unwrap().bytes, png());
    assert_eq!(
        messages[1].kind, "document",
        "sniffed by content, not by the .png name"
    );
    assert_eq!(messages[1].upload.as_ref().unwrap().bytes, b"not a png");
    assert_eq!(
        messages[1].upload.as_ref().unwrap().filename.as_deref(),
        Some("notes.png")
    );
    // The same call again (a re-run after a crash) is not sent twice, also by a channel
    // made afresh (a restarted process): the ledger is the store's.
    let again = channel.deliver(&photo).await.unwrap();
    assert!(again.repeated);
    assert_eq!(again.receipt, delivered.receipt);
    let fresh = channels.channel(&run, &binding).unwrap();
    assert!(fresh.deliver(&photo).await.unwrap().repeated);
    assert_eq!(fake.calls_of("sendPhoto").len(), 1);
}

#[tokio::test]
async fn captions_and_names_are_made_visible_and_sent_as_plain_text() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let (_dir, ledger) = ledger().await;
    let channels = TelegramChannels::new(BotApi::new(&fake.url(), TOKEN).unwrap(), ledger);
    let run = RunId::new();
    let binding = ChannelBinding {
        kind: "telegram".into(),
        address: "77".into(),
    };
    let channel = channels.channel(&run, &binding).unwrap();
    let caption = format!("<b>bold</b> & \u{202e}evil\u{1b}[2J{}", "x".repeat(2000));
    channel
        .deliver(&Delivery::new(
            run.clone(),
            "call_1",
            "re\u{202e}port.txt",
            b"text".to_vec(),
            Some(caption),
        ))
        .await
        .unwrap();
    let call = fake.calls_of("sendDocument").remove(0);
    let sent = call.str("caption").unwrap();
    assert!(
        sent.starts_with("<b>bold</b> & ⟨U+202E⟩evil⟨ESC⟩[2Jxxx"),
        "{sent}"
    );
    assert_eq!(
        sent.chars().count(),
        1024,
        "cut to Telegram's caption limit"
    );
    assert!(sent.ends_with('…'));
    assert_eq!(call.str("parse_mode"), None, "tags are shown, never parsed");
    assert_eq!(
        call.uploads[0].filename.as_deref(),
        Some("re⟨U+202E⟩port.txt")
    );
}

#[test]
fn a_bot_id_is_the_number_before_the_colon_and_never_the_secret() {
    assert_eq!(toren_telegram::bot_id("123456:abc"), "123456");
    assert_eq!(toren_telegram::bot_id("no-colon-all-secret"), "unknown");
    assert_eq!(toren_telegram::bot_id("secret:abc"), "unknown");
    assert_eq!(toren_telegram::bot_id(":abc"), "unknown");
}

#[tokio::test]
async fn size_limits_are_clear_tool_errors() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let (_dir, ledger) = ledger().await;
    let channels = TelegramChannels::new(BotApi::new(&fake.url(), TOKEN).unwrap(), ledger);
    let run = RunId::new();
    let binding = ChannelBinding {
        kind: "telegram".into(),
        address: "77".into(),
    };
    let channel = channels.channel(&run, &binding).unwrap();
    let mut big_png = png();
    big_png.resize(11 * 1024 * 1024, 0);
    let error = channel
        .deliver(&Delivery::new(run.clone(), "c1", "big.png", big_png, None))
        .await
        .unwrap_err();
    assert!(matches!(error, ChannelError::Refused { .. }));
    assert!(error.to_string().contains("at most 10 MB"), "{error}");
    let big = vec![b'a'; 51 * 1024 * 1024];
    let error = channel
        .deliver(&Delivery::new(run, "c2", "big.bin", big, None))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("at most 50 MB"), "{error}");
    assert!(fake.calls_of("sendPhoto").is_empty() && fake.calls_of("sendDocument").is_empty());
}
