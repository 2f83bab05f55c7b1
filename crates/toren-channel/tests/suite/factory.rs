//! Finding a run's channel from its binding.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use toren_channel::{
    ChannelError, ChannelFactory, Channels, NoChannels, TERMINAL, TerminalChannels,
};
use toren_protocol::{ChannelBinding, RunId};

fn binding(kind: &str, address: &str) -> ChannelBinding {
    ChannelBinding {
        kind: kind.to_owned(),
        address: address.to_owned(),
    }
}

#[test]
fn no_channels_refuses_every_binding() {
    let err = NoChannels
        .channel(&RunId::new(), &binding(TERMINAL, "s"))
        .unwrap_err();
    assert!(matches!(&err, ChannelError::Unavailable { kind } if kind == TERMINAL));
    assert_eq!(err.to_string(), "this process has no `terminal` channel");
    assert!(!err.is_retryable());
}

#[test]
fn channels_dispatch_by_kind() {
    let root = tempfile::tempdir().unwrap();
    let channels = Channels::new().with(TERMINAL, Arc::new(TerminalChannels::new(root.path())));
    let run = RunId::new();
    let channel = channels.channel(&run, &binding(TERMINAL, "chat")).unwrap();
    assert_eq!(channel.name(), TERMINAL);
    let err = channels
        .channel(&run, &binding("telegram", "123"))
        .unwrap_err();
    assert!(matches!(err, ChannelError::Unavailable { kind } if kind == "telegram"));
}

#[test]
fn terminal_directories_are_one_name_under_the_root() {
    let channels = TerminalChannels::new("/downloads");
    let run = RunId::new();
    assert_eq!(
        channels.dir(&run, "my-chat").unwrap(),
        std::path::Path::new("/downloads/my-chat")
    );
    // No address: the run's own directory.
    assert_eq!(
        channels.dir(&run, "").unwrap(),
        std::path::Path::new("/downloads").join(run.as_str())
    );
    for bad in ["..", ".", "a/b", "../up", "x\u{1b}[2J", "a\u{202e}b"] {
        let err = channels.dir(&run, bad).unwrap_err();
        assert!(
            matches!(err, ChannelError::BadAddress { .. }),
            "{bad:?}: {err}"
        );
    }
}
