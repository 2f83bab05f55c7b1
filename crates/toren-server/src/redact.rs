//! What of an event a client sees: everything but the server's own paths (where the agent
//! file is, where the workspace lives on the host). A client reads the workspace through
//! the files routes, never by its host path.

use toren_protocol::{Event, EventKind};

/// Stands in for a path of the server's.
const ON_THE_SERVER: &str = "(on the server)";

/// `event` as the API gives it.
pub(crate) fn for_client(mut event: Event) -> Event {
    match &mut event.kind {
        EventKind::RunCreated(created) => {
            created.agent.source = None;
            if let Some(policy) = &mut created.policy {
                policy.workspace = None;
            }
        }
        EventKind::SandboxProvisioned(provisioned) => {
            // The local backend's instance is the workspace itself.
            if provisioned.instance == provisioned.workspace {
                ON_THE_SERVER.clone_into(&mut provisioned.instance);
            }
            ON_THE_SERVER.clone_into(&mut provisioned.workspace);
        }
        _ => {}
    }
    event
}
