//! A session's line: the turns its conversation is made of now, after its rewinds.
//!
//! A session's turns are runs; each ended turn's own messages are recorded in the session
//! store once. A rewind turn (`TurnStart::rewound`, see `session_rewind`) takes the session
//! back to an earlier step: the turns after that step are left behind (their runs and logs
//! stay), and the conversation the next turn continues is the one of that step. This
//! module folds the turns in order into that line, deterministically, so a turn and a
//! resumed turn get the same history: a normal turn adds its recorded messages; a rewind
//! turn that completed cuts the line at its step (before a turn: that turn and what
//! follows go; inside a turn at event `seq`: the turn's messages up to that event, folded
//! from its log, replace its recorded ones); a rewind turn that did not complete changes
//! nothing. A step is named `TURN` (before that turn began) or `TURN.SEQ` (after event
//! `SEQ` of that turn's run, as `toren events` numbers them).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, OnceLock};

use toren_agent::RunState;
use toren_protocol::{EventKind, Message, RunId, RunStatus, TurnStart};
use toren_store::Session;

use crate::{Result, RunService};

/// A turn on the session's line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineTurn {
    pub turn: u32,
    pub run_id: RunId,
    /// How many messages of the conversation came before it.
    pub(crate) before: usize,
    /// Where a rewind cut it (`Some(seq)`): its events after `seq` were left behind.
    pub cut: Option<u64>,
}

/// The session's line up to some turn: its turns and the conversation they make.
#[derive(Clone, Debug, Default)]
pub(crate) struct Line {
    pub(crate) turns: Vec<LineTurn>,
    pub(crate) conversation: Vec<(u32, Message)>,
}

impl Line {
    pub(crate) fn find(&self, turn: u32) -> Option<&LineTurn> {
        self.turns.iter().find(|t| t.turn == turn)
    }

    /// The conversation before `turn` began.
    pub(crate) fn history_of(&self, turn: &LineTurn) -> Vec<Message> {
        self.conversation[..turn.before.min(self.conversation.len())]
            .iter()
            .map(|(_, m)| m.clone())
            .collect()
    }
}

/// How each run began (its `run_created.start`), which never changes once written.
fn starts() -> &'static Mutex<HashMap<RunId, Option<TurnStart>>> {
    static STARTS: OnceLock<Mutex<HashMap<RunId, Option<TurnStart>>>> = OnceLock::new();
    STARTS.get_or_init(Mutex::default)
}

impl RunService {
    /// How `run` began: its `run_created`'s `start` (cached: it never changes).
    pub(crate) async fn turn_start(&self, run: &RunId) -> Result<Option<TurnStart>> {
        if let Ok(cache) = starts().lock()
            && let Some(start) = cache.get(run)
        {
            return Ok(start.clone());
        }
        let events = self.store().read(run, 0).await?;
        let start = events.first().and_then(|e| match &e.kind {
            EventKind::RunCreated(c) => c.start.clone(),
            _ => None,
        });
        if let Ok(mut cache) = starts().lock() {
            if cache.len() > 50_000 {
                cache.clear();
            }
            cache.insert(run.clone(), start.clone());
        }
        Ok(start)
    }

    /// The session's line made of its ended turns before `before_turn`, their recorded
    /// messages and its completed rewinds (see the module doc).
    pub(crate) async fn line_before(&self, session_id: &str, before_turn: u32) -> Result<Line> {
        let store = self.session_store()?;
        let mut recorded: BTreeMap<u32, Vec<Message>> = BTreeMap::new();
        for (turn, message) in store.conversation(session_id, before_turn).await? {
            recorded.entry(turn).or_default().push(message);
        }
        let mut line = Line::default();
        for turn in store.turns(session_id).await? {
            if turn.turn >= before_turn {
                break;
            }
            let rewound = self.turn_start(&turn.run_id).await?.and_then(|s| s.rewound);
            let Some(rewound) = rewound else {
                let before = line.conversation.len();
                let own = recorded.remove(&turn.turn).unwrap_or_default();
                line.conversation
                    .extend(own.into_iter().map(|m| (turn.turn, m)));
                line.turns.push(LineTurn {
                    turn: turn.turn,
                    run_id: turn.run_id,
                    before,
                    cut: None,
                });
                continue;
            };
            // A rewind that did not complete took nothing back.
            if turn.status != RunStatus::Completed {
                continue;
            }
            let target = rewound.turn.unwrap_or(0);
            let Some(at) = line.turns.iter().position(|t| t.turn == target) else {
                tracing::warn!(
                    session = session_id,
                    turn = turn.turn,
                    target,
                    "a rewind turn names a turn off the session's line; it is ignored"
                );
                continue;
            };
            let cut = line.turns[at].clone();
            line.conversation.truncate(cut.before);
            if rewound.to == 0 {
                line.turns.truncate(at);
            } else {
                let own = self.messages_at(&line, &cut, rewound.to).await?;
                line.conversation
                    .extend(own.into_iter().map(|m| (cut.turn, m)));
                line.turns.truncate(at + 1);
                if let Some(last) = line.turns.last_mut() {
                    last.cut = Some(rewound.to);
                }
            }
        }
        Ok(line)
    }

    /// The folded state of `turn`'s run on top of the conversation before it.
    pub(crate) async fn fold_turn(&self, line: &Line, turn: &LineTurn) -> Result<RunState> {
        let events = self.store().read(&turn.run_id, 0).await?;
        RunState::from_events_with_history(&line.history_of(turn), &events)
            .map_err(|e| crate::Error::Worker(toren_worker::Error::from(e)))
    }

    /// `turn`'s own messages as they were after its event `seq`.
    async fn messages_at(&self, line: &Line, turn: &LineTurn, seq: u64) -> Result<Vec<Message>> {
        let events = self.store().read(&turn.run_id, 0).await?;
        let upto: Vec<_> = events.into_iter().filter(|e| e.seq <= seq).collect();
        let state = RunState::from_events_with_history(&line.history_of(turn), &upto)
            .map_err(|e| crate::Error::Worker(toren_worker::Error::from(e)))?;
        Ok(state.own_messages())
    }

    /// The turns of the session's line now, oldest first (the turns a rewind can go back
    /// to; `toren sessions show`, the chat and the web page name steps by them).
    pub async fn session_line(&self, session: &Session) -> Result<Vec<LineTurn>> {
        self.record_ended_turns(session).await?;
        Ok(self.line_before(&session.id, u32::MAX).await?.turns)
    }
}
