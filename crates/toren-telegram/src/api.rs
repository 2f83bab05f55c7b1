//! [`BotApi`]: the Bot API methods the bot uses, written by hand over reqwest (no Telegram
//! crate: the few endpoints are simpler than a dependency, and frankenstein's WTFPL licence
//! would be the project's only one). Parameters go as JSON, files as `multipart/form-data`
//! built here. A 429 is waited out for its `retry_after` (up to [`MAX_RETRY_AFTER`], a few
//! times) and then reported; nothing here ever prints a URL, which holds the token.

use std::fmt;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::types::{File, Sent, Update};

/// The public Bot API.
pub const DEFAULT_API_URL: &str = "https://api.telegram.org";
/// The longest `retry_after` waited for; a longer one is reported to the caller.
pub const MAX_RETRY_AFTER: u64 = 60;
/// How many 429s in a row one call waits out.
const MAX_RATE_RETRIES: u32 = 3;
/// Telegram's limit on a callback answer's text, in characters.
const CALLBACK_TEXT_LIMIT: usize = 200;
/// What an ordinary call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// A Bot API client for one bot.
#[derive(Clone)]
pub struct BotApi {
    http: reqwest::Client,
    /// `{api}/bot{token}`: holds the token, never shown.
    base: String,
    /// `{api}/file/bot{token}`.
    files: String,
    bot_id: String,
}

impl fmt::Debug for BotApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BotApi")
            .field("bot_id", &self.bot_id)
            .finish_non_exhaustive()
    }
}

/// A file to upload.
pub struct Upload<'a> {
    pub field: &'static str,
    pub name: &'a str,
    pub media_type: &'a str,
    pub bytes: &'a [u8],
}

impl BotApi {
    /// A client of the Bot API at `api_url` for the bot with `token`.
    pub fn new(api_url: &str, token: &str) -> Result<Self> {
        // Err means some provider is installed already, which is all reqwest needs.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(Error::transport)?;
        let api = api_url.trim_end_matches('/');
        Ok(Self {
            http,
            base: format!("{api}/bot{token}"),
            files: format!("{api}/file/bot{token}"),
            bot_id: bot_id(token),
        })
    }

    /// The bot's id: the token's part before `:` (not secret), for naming its state.
    pub fn bot_id(&self) -> &str {
        &self.bot_id
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: &'static str,
        params: &Value,
        timeout: Duration,
    ) -> Result<T> {
        self.send(method, timeout, || {
            self.http
                .post(format!("{}/{method}", self.base))
                .json(params)
        })
        .await
    }

    async fn send<T: DeserializeOwned>(
        &self,
        method: &'static str,
        timeout: Duration,
        request: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<T> {
        let mut limited = 0;
        loop {
            let response = request()
                .timeout(timeout)
                .send()
                .await
                .map_err(Error::transport)?;
            let status = response.status().as_u16();
            let body: Value = response.json().await.map_err(Error::transport)?;
            if body.get("ok").and_then(Value::as_bool) == Some(true) {
                let result = body.get("result").cloned().unwrap_or(Value::Null);
                return serde_json::from_value(result).map_err(|e| Error::Unexpected {
                    method,
                    why: e.to_string(),
                });
            }
            let code = body
                .get("error_code")
                .and_then(Value::as_u64)
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or(status);
            let description = body
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("no description")
                .to_owned();
            if code == 429 {
                let retry_after = body
                    .pointer("/parameters/retry_after")
                    .and_then(Value::as_u64)
                    .unwrap_or(1);
                limited += 1;
                if retry_after > MAX_RETRY_AFTER || limited > MAX_RATE_RETRIES {
                    return Err(Error::RateLimited {
                        method,
                        retry_after,
                    });
                }
                tracing::info!(method, retry_after, "Telegram asked to slow down; waiting");
                tokio::time::sleep(Duration::from_secs(retry_after)).await;
                continue;
            }
            return Err(Error::Api {
                method,
                code,
                description,
            });
        }
    }

    /// `getUpdates` from `offset`, waiting up to `timeout` for one (long polling).
    pub async fn get_updates(&self, offset: i64, timeout: Duration) -> Result<Vec<Update>> {
        let params = json!({
            "offset": offset,
            "timeout": timeout.as_secs(),
            "allowed_updates": ["message", "callback_query"],
        });
        self.call("getUpdates", &params, timeout + Duration::from_secs(15))
            .await
    }

    /// `sendMessage`; `markup` is an inline keyboard.
    pub async fn send_message(
        &self,
        chat: i64,
        text: &str,
        html: bool,
        markup: Option<Value>,
    ) -> Result<i64> {
        let mut params =
            json!({"chat_id": chat, "text": text, "link_preview_options": {"is_disabled": true}});
        if html {
            params["parse_mode"] = json!("HTML");
        }
        if let Some(markup) = markup {
            params["reply_markup"] = markup;
        }
        let sent: Sent = self.call("sendMessage", &params, CALL_TIMEOUT).await?;
        Ok(sent.message_id)
    }

    /// `editMessageText`; a message that would not change is not an error.
    pub async fn edit_message(
        &self,
        chat: i64,
        message: i64,
        text: &str,
        html: bool,
        markup: Option<Value>,
    ) -> Result<()> {
        let mut params = json!({"chat_id": chat, "message_id": message, "text": text, "link_preview_options": {"is_disabled": true}});
        if html {
            params["parse_mode"] = json!("HTML");
        }
        if let Some(markup) = markup {
            params["reply_markup"] = markup;
        }
        match self
            .call::<Value>("editMessageText", &params, CALL_TIMEOUT)
            .await
        {
            Err(Error::Api { description, .. }) if description.contains("not modified") => Ok(()),
            other => other.map(drop),
        }
    }

    /// `editMessageReplyMarkup` (`None`: the buttons go).
    pub async fn edit_markup(&self, chat: i64, message: i64, markup: Option<Value>) -> Result<()> {
        let mut params = json!({"chat_id": chat, "message_id": message});
        if let Some(markup) = markup {
            params["reply_markup"] = markup;
        }
        match self
            .call::<Value>("editMessageReplyMarkup", &params, CALL_TIMEOUT)
            .await
        {
            Err(Error::Api { description, .. }) if description.contains("not modified") => Ok(()),
            other => other.map(drop),
        }
    }

    /// `sendChatAction` `typing`.
    pub async fn typing(&self, chat: i64) -> Result<()> {
        let params = json!({"chat_id": chat, "action": "typing"});
        self.call::<Value>("sendChatAction", &params, CALL_TIMEOUT)
            .await
            .map(drop)
    }

    /// `answerCallbackQuery` with a short notice (cut to Telegram's 200 characters).
    pub async fn answer_callback(&self, id: &str, text: &str) -> Result<()> {
        let text = if text.chars().count() > CALLBACK_TEXT_LIMIT {
            let mut cut: String = text.chars().take(CALLBACK_TEXT_LIMIT - 1).collect();
            cut.push('…');
            cut
        } else {
            text.to_owned()
        };
        let params = json!({"callback_query_id": id, "text": text});
        self.call::<Value>("answerCallbackQuery", &params, CALL_TIMEOUT)
            .await
            .map(drop)
    }

    /// `sendPhoto` (`file.field` `photo`) or `sendDocument` (`document`) with a caption.
    pub async fn send_file(
        &self,
        method: &'static str,
        chat: i64,
        file: &Upload<'_>,
        caption: Option<&str>,
    ) -> Result<i64> {
        let boundary = format!("toren-{}", ulid::Ulid::generate());
        let mut fields = vec![("chat_id", chat.to_string())];
        if let Some(caption) = caption {
            fields.push(("caption", caption.to_owned()));
        }
        let body = multipart(&boundary, &fields, file);
        let content_type = format!("multipart/form-data; boundary={boundary}");
        let url = format!("{}/{method}", self.base);
        let sent: Sent = self
            .send(method, Duration::from_secs(300), || {
                self.http
                    .post(&url)
                    .header("content-type", &content_type)
                    .body(body.clone())
            })
            .await?;
        Ok(sent.message_id)
    }

    /// `getFile` and the download of its bytes.
    pub async fn download(&self, file_id: &str) -> Result<Vec<u8>> {
        let file: File = self
            .call("getFile", &json!({"file_id": file_id}), CALL_TIMEOUT)
            .await?;
        let Some(path) = file.file_path else {
            return Err(Error::Unexpected {
                method: "getFile",
                why: "no file_path (the file is too large to download)".to_owned(),
            });
        };
        let response = self
            .http
            .get(format!("{}/{path}", self.files))
            .timeout(Duration::from_secs(300))
            .send()
            .await
            .map_err(Error::transport)?;
        if !response.status().is_success() {
            return Err(Error::Api {
                method: "getFile",
                code: response.status().as_u16(),
                description: "the file download failed".to_owned(),
            });
        }
        Ok(response.bytes().await.map_err(Error::transport)?.to_vec())
    }
}

/// The bot id of `token` (`<id>:<secret>`): its part before `:`, when that is a number
/// (else `unknown`: a malformed token's text, which may be all secret, is never used).
pub fn bot_id(token: &str) -> String {
    match token.split_once(':') {
        Some((id, _)) if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) => id.to_owned(),
        _ => "unknown".to_owned(),
    }
}

/// A `multipart/form-data` body of text `fields` and one file.
fn multipart(boundary: &str, fields: &[(&str, String)], file: &Upload<'_>) -> Vec<u8> {
    let mut body = Vec::with_capacity(file.bytes.len() + 512);
    for (name, value) in fields {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    // Quotes and line breaks would break the header; such names are rare, so replaced.
    let name: String = file
        .name
        .chars()
        .map(|c| {
            if matches!(c, '"' | '\r' | '\n' | '\\') {
                '_'
            } else {
                c
            }
        })
        .collect();
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{}\"; filename=\"{name}\"\r\nContent-Type: {}\r\n\r\n",
            file.field, file.media_type
        )
        .as_bytes(),
    );
    body.extend_from_slice(file.bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    body
}
