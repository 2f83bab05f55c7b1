//! The tools as the model sees them: names, descriptions and JSON Schemas. The descriptions
//! are the model's only documentation, so they state the behaviour and the limits exactly.

use serde_json::json;
use toren_protocol::ToolSpec;

use crate::ToolSettings;
use crate::{bash, read, send, write};

pub(crate) fn specs(settings: &ToolSettings) -> Vec<ToolSpec> {
    vec![
        bash_spec(settings),
        read_spec(settings),
        write_spec(settings),
        edit_spec(settings),
        send_spec(settings),
    ]
}

fn bash_spec(s: &ToolSettings) -> ToolSpec {
    let default = s.bash_default_timeout.as_secs();
    let max = s.bash_max_timeout.as_secs();
    ToolSpec {
        name: bash::NAME.to_owned(),
        description: format!(
            "Run a shell command with `bash -c` in the sandbox. Every call starts a fresh \
             shell in the workspace root (`/workspace`, also $HOME): files persist between \
             calls, but the working directory, variables and processes do not, and anything \
             the command starts in the background is killed when the call ends. stdout and \
             stderr come back together, followed by a last line `[exit code: N]`; output over \
             {} bytes keeps only its beginning and end. A human may have to approve each \
             command before it runs, and the network may be disabled.",
            s.output_limit
        ),
        input_schema: json!({
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "description": "The command line, e.g. `ls -la` or `cd src && cargo test 2>&1 | tail -20`."
                },
                "timeout_secs": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": max,
                    "description": format!(
                        "Kill the command after this many seconds (default {default}, at most {max}; larger values are refused)."
                    )
                }
            },
            "required": ["command"],
            "additionalProperties": false
        }),
    }
}

fn read_spec(s: &ToolSettings) -> ToolSpec {
    ToolSpec {
        name: read::NAME.to_owned(),
        description: format!(
            "Read a text file in the workspace. Each line comes back prefixed with its line \
             number and a tab, like `cat -n`; that prefix is not part of the file, so leave it \
             out of edit_file's old_string. Returns up to {} lines from `offset` (at most {} \
             bytes); when the file goes on, a last line says which offset to pass to read on. \
             Lines longer than {} bytes are cut. Lines are shown without the `\\r` of CRLF \
             line endings; a last line says when a file has line endings other than LF. \
             Binary files and files over {} bytes are refused: use bash for those.",
            s.read_max_lines,
            s.read_max_bytes,
            read::MAX_LINE_BYTES,
            s.file_size_limit
        ),
        input_schema: json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Relative to the workspace root, e.g. `src/main.rs` (not `/workspace/src/main.rs`)."
                },
                "offset": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "The first line to return, 1-based (default 1)."
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "description": format!("How many lines to return (default {}).", s.read_max_lines)
                }
            },
            "required": ["path"],
            "additionalProperties": false
        }),
    }
}

fn write_spec(s: &ToolSettings) -> ToolSpec {
    ToolSpec {
        name: write::WRITE.to_owned(),
        description: format!(
            "Create a file in the workspace, or replace all of an existing file's content. \
             Missing parent directories are created. Content over {} bytes is refused. To \
             change part of a file, use edit_file.",
            s.file_size_limit
        ),
        input_schema: json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Relative to the workspace root, e.g. `notes/todo.md`."
                },
                "content": {
                    "type": "string",
                    "description": "The complete new content of the file."
                }
            },
            "required": ["path", "content"],
            "additionalProperties": false
        }),
    }
}

fn edit_spec(s: &ToolSettings) -> ToolSpec {
    ToolSpec {
        name: write::EDIT.to_owned(),
        description: format!(
            "Replace exact text in a workspace file. `old_string` must match the file exactly \
             — whitespace, indentation and line breaks included — and, unless `replace_all` \
             is true, exactly once: include enough surrounding lines to make it unique. A \
             line break matches CRLF or LF alike, and the file keeps its line endings. An \
             edit that would make the file larger than {} bytes is refused. Read the file \
             first. To create a file, use write_file.",
            s.file_size_limit
        ),
        input_schema: json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Relative to the workspace root."
                },
                "old_string": {
                    "type": "string",
                    "description": "The exact text to replace (without read_file's line numbers)."
                },
                "new_string": {
                    "type": "string",
                    "description": "The text to put in its place; must differ from old_string."
                },
                "replace_all": {
                    "type": "boolean",
                    "description": "Replace every occurrence instead of requiring exactly one (default false)."
                }
            },
            "required": ["path", "old_string", "new_string"],
            "additionalProperties": false
        }),
    }
}

fn send_spec(s: &ToolSettings) -> ToolSpec {
    ToolSpec {
        name: send::NAME.to_owned(),
        description: format!(
            "Send a file from the workspace to the person you are working for, through the \
             chat they talk to you in: in a terminal chat it is saved to their downloads \
             folder; where the chat can show pictures, a PNG, JPEG, GIF or WebP image is \
             shown as one. This is the sanctioned way to hand the person a file: never invent \
             links or URLs to files, and do not paste a file's content instead. Files over {} \
             bytes are refused (compress or split them). When the run has no chat (the tool \
             says so), tell the person the file's path in the workspace instead. Sending \
             never needs approval.",
            s.file_size_limit
        ),
        input_schema: json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "The file to send, relative to the workspace root, e.g. `out/report.pdf`."
                },
                "caption": {
                    "type": "string",
                    "maxLength": send::MAX_CAPTION,
                    "description": "A short line shown with the file, e.g. what it is."
                }
            },
            "required": ["path"],
            "additionalProperties": false
        }),
    }
}
