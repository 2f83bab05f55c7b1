//! The fake's answers to the methods that change or read its state: messages sent and
//! edited, chat actions, callback answers, files sent (kept whole) and `getFile`.

use serde_json::{Value, json};

use super::{BotMessage, State, Upload, bad, int, ok};

pub(crate) fn handle(
    state: &mut State,
    method: &str,
    params: &Value,
    uploads: &[Upload],
) -> (u16, Value) {
    let chat = int(params, "chat_id");
    match method {
        "getMe" => {
            ok(json!({"id": 42, "is_bot": true, "first_name": "toren", "username": "toren_bot"}))
        }
        "sendMessage" => {
            let Some(chat) = chat else {
                return bad(400, "Bad Request: chat_id is empty");
            };
            let text = params.get("text").and_then(Value::as_str).unwrap_or("");
            if text.is_empty() {
                return bad(400, "Bad Request: message text is empty");
            }
            if text.chars().count() > 4096 {
                return bad(400, "Bad Request: message is too long");
            }
            let id = state.next_message;
            state.next_message += 1;
            state.messages.insert(
                (chat, id),
                BotMessage {
                    chat_id: chat,
                    message_id: id,
                    kind: "text".to_owned(),
                    text: text.to_owned(),
                    parse_mode: params
                        .get("parse_mode")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    reply_markup: params.get("reply_markup").cloned(),
                    edits: 0,
                    upload: None,
                },
            );
            ok(
                json!({"message_id": id, "date": 1_700_000_000, "chat": {"id": chat, "type": "private"}, "text": text}),
            )
        }
        "editMessageText" | "editMessageReplyMarkup" => {
            let (Some(chat), Some(id)) = (chat, int(params, "message_id")) else {
                return bad(400, "Bad Request: message identifier is not specified");
            };
            let Some(message) = state.messages.get_mut(&(chat, id)) else {
                return bad(400, "Bad Request: message to edit not found");
            };
            if method == "editMessageText" {
                let text = params.get("text").and_then(Value::as_str).unwrap_or("");
                if text.is_empty() || text.chars().count() > 4096 {
                    return bad(400, "Bad Request: bad message text");
                }
                let markup = params.get("reply_markup").cloned();
                if message.text == text && message.reply_markup == markup {
                    return bad(
                        400,
                        "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
                    );
                }
                message.text = text.to_owned();
                message.parse_mode = params
                    .get("parse_mode")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                message.reply_markup = markup;
                message.edits += 1;
            } else {
                message.reply_markup = params.get("reply_markup").cloned();
            }
            ok(
                json!({"message_id": id, "date": 1_700_000_000, "chat": {"id": chat, "type": "private"}}),
            )
        }
        "sendChatAction" => ok(json!(true)),
        "answerCallbackQuery" => {
            let id = params
                .get("callback_query_id")
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                .unwrap_or_default();
            let text = params.get("text").and_then(Value::as_str).unwrap_or("");
            state.answers.insert(id, text.to_owned());
            ok(json!(true))
        }
        "sendPhoto" | "sendDocument" => {
            let Some(chat) = chat else {
                return bad(400, "Bad Request: chat_id is empty");
            };
            let field = if method == "sendPhoto" {
                "photo"
            } else {
                "document"
            };
            let Some(upload) = uploads.iter().find(|u| u.field == field) else {
                return bad(400, "Bad Request: there is no file in the request");
            };
            let limit = if method == "sendPhoto" {
                10 << 20
            } else {
                50 << 20
            };
            if upload.bytes.len() > limit {
                return bad(413, "Request Entity Too Large");
            }
            let id = state.next_message;
            state.next_message += 1;
            state.next_file += 1;
            let file_id = format!("out{}", state.next_file);
            state.files.insert(
                file_id.clone(),
                (format!("sent/{file_id}"), upload.bytes.clone()),
            );
            let caption = params.get("caption").and_then(Value::as_str).unwrap_or("");
            state.messages.insert(
                (chat, id),
                BotMessage {
                    chat_id: chat,
                    message_id: id,
                    kind: field.to_owned(),
                    text: caption.to_owned(),
                    parse_mode: params
                        .get("parse_mode")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    reply_markup: None,
                    edits: 0,
                    upload: Some(upload.clone()),
                },
            );
            let mut message = json!({"message_id": id, "date": 1_700_000_000, "chat": {"id": chat, "type": "private"}});
            if method == "sendPhoto" {
                message["photo"] =
                    json!([{"file_id": file_id, "file_unique_id": "u", "width": 1, "height": 1}]);
            } else {
                message["document"] = json!({"file_id": file_id, "file_unique_id": "u", "file_name": upload.filename});
            }
            ok(message)
        }
        "getFile" => {
            let id = params.get("file_id").and_then(Value::as_str).unwrap_or("");
            match state.files.get(id) {
                Some((path, bytes)) => ok(
                    json!({"file_id": id, "file_unique_id": "u", "file_size": bytes.len(), "file_path": path}),
                ),
                None => bad(400, "Bad Request: invalid file_id"),
            }
        }
        _ => bad(404, "Not Found"),
    }
}
