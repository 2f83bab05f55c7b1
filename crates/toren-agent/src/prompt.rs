//! The system prompt: the agent's own instructions, or a default that explains the
//! workspace and the tools.

use toren_protocol::AgentSpec;

/// The default instructions for an agent file without `instructions`.
pub fn default_instructions(has_sandbox: bool) -> String {
    if has_sandbox {
        "You are a capable assistant with a computer: a private workspace directory that \
         persists for this run. Use the tools to do the work rather than describing it.\n\
         - `bash` runs a shell command in the workspace root (a fresh shell each call; \
         state such as `cd` or exported variables does not carry over). A human may have \
         to approve each command, and may deny it with a reason: adapt when that happens.\n\
         - `read_file`, `write_file` and `edit_file` work on files in the workspace. Paths \
         are relative to the workspace root; paths leading outside it are refused. Prefer \
         `edit_file` with an exact `old_string` over rewriting whole files, and read a file \
         before editing it.\n\
         - Commands have a timeout and their output is capped; redirect long output to a \
         file and read the parts you need.\n\
         When the task is done, answer with a short summary of what you did and what you \
         found."
            .to_owned()
    } else {
        "You are a helpful assistant. You have no tools and no computer in this \
         conversation: answer from what you know, and say so when you cannot do something."
            .to_owned()
    }
}

/// The system prompt for a run of `agent`.
pub fn system_prompt(agent: &AgentSpec) -> String {
    agent
        .instructions
        .clone()
        .unwrap_or_else(|| default_instructions(agent.sandbox.is_some()))
}
