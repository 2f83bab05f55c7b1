//! The `send_to_channel` tool: hands a workspace file to the person through the run's
//! channel (the terminal's downloads folder, later a Telegram chat). The file is read
//! through the workspace's capability handle like every file tool's (paths beneath the
//! workspace only, regular files only, the same size limit); the channel is given the run
//! and call ids, so a call run again after an interruption is not delivered twice. What
//! was delivered comes back beside the outcome, for the worker to journal as
//! `message_delivered`. A run without a channel (`toren run`) gets a tool error telling the
//! model to give the person the file's path instead.

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use toren_channel::Delivery;
use toren_protocol::{MessageDelivered, ToolCall};
use toren_sandbox::Files;

use crate::ToolSettings;
use crate::error::{Result, ToolError};
use crate::files::model_error;
use crate::outcome::{ToolOutcome, parse_args};
use crate::toolkit::{Executed, RunChannel};

pub(crate) const NAME: &str = "send_to_channel";
const USAGE: &str = r#"{"path": string, "caption"?: string}"#;

/// The longest caption, in characters (Telegram's limit for a photo's or document's).
pub(crate) const MAX_CAPTION: usize = 1024;

/// What the model is told on a run that no chat is bound to.
pub(crate) const NO_CHANNEL: &str = "this run has no chat to send files to; tell the person \
     the file's path in the workspace instead";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SendArgs {
    path: String,
    #[serde(default)]
    caption: Option<String>,
}

pub(crate) async fn run(
    settings: &ToolSettings,
    files: &Arc<dyn Files>,
    call: &ToolCall,
    channel: Option<&RunChannel>,
) -> Result<Executed> {
    let args: SendArgs = match parse_args(NAME, USAGE, &call.arguments) {
        Ok(args) => args,
        Err(message) => return Ok(ToolOutcome::error(message).into()),
    };
    if args.path.trim().is_empty() {
        return Ok(ToolOutcome::error("`path` is empty; give the path of the file to send").into());
    }
    let caption = args.caption.filter(|c| !c.trim().is_empty());
    if let Some(len) = caption.as_ref().map(|c| c.chars().count())
        && len > MAX_CAPTION
    {
        return Ok(ToolOutcome::error(format!(
            "`caption` is {len} characters, more than the limit of {MAX_CAPTION}; shorten it, \
             or write the rest in your answer"
        ))
        .into());
    }
    let Some(channel) = channel else {
        return Ok(ToolOutcome::error(format!("{NO_CHANNEL} (`{}`)", args.path)).into());
    };
    let bytes = match read(files, &args.path, settings.file_size_limit).await? {
        Ok(bytes) => bytes,
        Err(refusal) => return Ok(refusal.into()),
    };
    let name = Path::new(&args.path)
        .file_name()
        .map_or_else(|| "file".to_owned(), |n| n.to_string_lossy().into_owned());
    let delivery = Delivery::new(
        channel.run_id.clone(),
        call.id.clone(),
        name,
        bytes,
        caption,
    );
    let via = channel.channel.name().to_owned();
    let delivered = match channel.channel.deliver(&delivery).await {
        Ok(delivered) => delivered,
        Err(err) => {
            tracing::warn!(run = %channel.run_id, call = %call.id, "could not deliver a file: {err}");
            return Ok(ToolOutcome::error(format!(
                "could not send `{}` through the {via} channel: {err} ({}); tell the person \
                 the file's path in the workspace instead",
                args.path,
                err.hint()
            ))
            .into());
        }
    };
    let again = if delivered.repeated {
        " It had already been sent before this call was interrupted, and was not sent again."
    } else {
        ""
    };
    let outcome = ToolOutcome::success(format!(
        "sent `{}` ({} bytes, {}) to the person through the {via} channel: {}.{again}",
        args.path,
        delivery.len(),
        delivery.kind(),
        delivered.summary,
    ));
    Ok(Executed {
        outcome,
        delivered: Some(MessageDelivered {
            call_id: call.id.clone(),
            channel: via,
            path: args.path,
            bytes: delivery.len(),
            sha256: delivery.sha256().to_owned(),
            kind: delivery.kind().as_str().to_owned(),
            caption: delivery.caption().map(str::to_owned),
            receipt: delivered.receipt,
            repeated: delivered.repeated,
        }),
    })
}

/// The file's bytes, or the tool error saying why it cannot be sent; `Err` for host faults.
async fn read(
    files: &Arc<dyn Files>,
    path: &str,
    limit: u64,
) -> Result<std::result::Result<Vec<u8>, ToolOutcome>> {
    let files = Arc::clone(files);
    let path = path.to_owned();
    let joined = tokio::task::spawn_blocking(move || match files.read(&path, limit) {
        Ok(bytes) => Ok(Ok(bytes)),
        Err(err) => model_error(err, |err| match err {
            toren_sandbox::Error::TooLarge { .. } => Some(
                "compress it (e.g. `gzip -k`, or `zip`) or split it (`split -b`) and send the \
                 parts",
            ),
            toren_sandbox::Error::IsDirectory { .. } => {
                Some("send one file; archive a directory first (e.g. `tar czf out.tgz dir`)")
            }
            _ => None,
        })
        .map(Err),
    })
    .await;
    match joined {
        Ok(result) => Ok(result?),
        Err(source) => Err(ToolError::Crashed { tool: NAME, source }),
    }
}
