//! Rewinding a session: its workspace and its conversation go back to an earlier step as
//! one unit (`toren rewind SESSION --to STEP`, `/undo` and `/rewind` in the chat,
//! `POST /sessions/{id}/rewind`, the web page's button).
//!
//! A step is `TURN` (before that turn began: the workspace as the checkpoint taken then,
//! the conversation of the turns before it) or `TURN.SEQ` (after event `SEQ` of that
//! turn's run, a step between model calls: no tool call pending). The rewind is a turn of
//! its own (`TurnStart::rewound` in its `run_created`), made in the same write that checks
//! that no other turn runs; it is then completed by restoring the workspace (idempotent;
//! a process killed in between leaves it due for whoever drives the turn next, like a run's
//! `rewound`). The session's line (`session_line`) then continues from that step: the turns
//! after it stay in the store and their logs, left behind. Going back within the newest
//! turn while it has not ended is that run's own rewind (`RunService::rewind`); going
//! further back then is refused until it ends (`/undo` cancels it first if no live
//! process drives it, or if the asking process drives it itself, as a bot's turn task,
//! and waits for it to end). The workspace at the step is the first checkpoint recorded after
//! it (before the next turn, or before the next call that could change the workspace);
//! a change with no checkpoint before it makes the step unknown, and the rewind refused.

use std::fmt;
use std::str::FromStr;

use toren_protocol::{EventKind, Rewound, RunId, TurnStart};
use toren_store::Session;

use crate::session_line::Line;
use crate::{Actor, Error, Result, RunService};

/// A step of a session, as people type it: `3` (before turn 3) or `3.7` (after event 7 of
/// turn 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionStep {
    pub turn: u32,
    /// 0: before the turn began.
    pub seq: u64,
}

impl FromStr for SessionStep {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        let bad = || {
            format!(
                "`{text}` is not a session step: give TURN (before that turn began, e.g. 3) or \
                 TURN.SEQ (after event SEQ of that turn's run, e.g. 3.7, as `toren events` \
                 numbers them)"
            )
        };
        let (turn, seq) = match text.split_once('.') {
            Some((turn, seq)) => (turn, seq.parse::<u64>().map_err(|_| bad())?),
            None => (text, 0),
        };
        let turn = turn.parse::<u32>().map_err(|_| bad())?;
        if turn == 0 {
            return Err(bad());
        }
        Ok(Self { turn, seq })
    }
}

impl fmt::Display for SessionStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&TurnStart::step_name(self.turn, self.seq))
    }
}

/// What a session's rewind did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRewound {
    /// The step the session went back to.
    pub step: SessionStep,
    /// The turn that records the rewind (a rewind turn; or, within the newest turn while it
    /// runs, that turn itself) and its run.
    pub turn: u32,
    pub run_id: RunId,
    /// The workspace checkpoint restored; `None`: nothing had changed the workspace since.
    pub checkpoint: Option<String>,
}

impl RunService {
    /// Takes `session` back to `step` as `actor` (see the module doc); `holder` names this
    /// process for the rewind turn's lease.
    pub async fn rewind_session(
        &self,
        session: &Session,
        step: SessionStep,
        actor: &Actor,
        holder: &str,
    ) -> Result<SessionRewound> {
        let refuse = |why: String| Error::SessionRewind {
            session: session.name.clone(),
            why,
        };
        let store = self.session_store()?;
        let turns = store.turns(&session.id).await?;
        if let Some(open) = turns.iter().find(|t| !t.status.is_terminal()) {
            if open.turn == step.turn && step.seq > 0 {
                let outcome = self.rewind(&open.run_id, step.seq, actor, holder).await?;
                return Ok(SessionRewound {
                    step,
                    turn: open.turn,
                    run_id: open.run_id.clone(),
                    checkpoint: outcome.checkpoint,
                });
            }
            return Err(refuse(format!(
                "turn {} (run {}) has not ended: go back within it (`--to {}.SEQ`), or let it \
                 end or cancel it (`toren cancel {}`) first",
                open.turn, open.run_id, open.turn, open.run_id
            )));
        }
        self.record_ended_turns(session).await?;
        let line = self.line_before(&session.id, u32::MAX).await?;
        self.check_step(&line, step).await.map_err(refuse)?;
        let checkpoint = self.checkpoint_at(session, step).await.map_err(refuse)?;
        // The rewind turn's own checkpoint (the workspace before the rewind, so that it can
        // be undone) is taken before the check that the step's is kept: taking it may prune
        // the oldest (`keep` plus a quarter are let pile up), the step's among them.
        let mut created = self.turn_created(session, String::new(), None).await;
        if let (Some(id), Some(policy)) = (&checkpoint, &session.policy)
            && let Err(why) = toren_worker::checkpoint_restorable(policy, id).await
        {
            return Err(refuse(format!("the workspace at step {step}: {why}")));
        }
        if let Some(start) = created.start.as_mut() {
            start.rewound = Some(Rewound {
                to: step.seq,
                checkpoint: checkpoint.clone(),
                by: Some(actor.label()),
                turn: Some(step.turn),
            });
        }
        let run_id = RunId::new();
        let (_, lease, turn) = store
            .create_turn(
                &session.id,
                &run_id,
                created,
                holder,
                self.settings.lease_ttl,
            )
            .await?;
        // The line may have moved between the checks and the turn (a turn made and ended
        // by another process): checked again under the rewind turn's lease, and the
        // rewind failed rather than made against a line it was not planned on.
        let line = self.line_before(&session.id, turn).await?;
        let moved = match self.check_step(&line, step).await {
            Err(why) => Some(why),
            Ok(()) => match self.checkpoint_at(session, step).await {
                Ok(again) if again == checkpoint => None,
                Ok(_) => Some("the session moved on while it was being rewound".to_owned()),
                Err(why) => Some(why),
            },
        };
        if let Some(why) = moved {
            let failed = toren_protocol::RunFailed {
                error: format!("the rewind was not made: {why}; rewind again"),
            };
            self.store()
                .append(&lease, 1, vec![EventKind::RunFailed(failed)])
                .await?;
            return Err(refuse(why));
        }
        toren_worker::complete_rewind_turn(self.store().as_ref(), self.backends.as_ref(), &lease)
            .await?;
        if let Ok(events) = self.store().read(&run_id, 0).await {
            for event in &events {
                toren_worker::Observer::event(self.notifier(), event);
            }
        }
        Ok(SessionRewound {
            step,
            turn,
            run_id,
            checkpoint,
        })
    }

    /// `/undo`: back to before the newest turn on the session's line. A newest turn that
    /// has not ended and that no live process drives is cancelled first.
    pub async fn undo_session(
        &self,
        session: &Session,
        actor: &Actor,
        holder: &str,
    ) -> Result<SessionRewound> {
        let store = self.session_store()?;
        if let Some(open) = store
            .turns(&session.id)
            .await?
            .into_iter()
            .find(|t| !t.status.is_terminal())
        {
            let summary = self.summary(&open.run_id).await?;
            let ours = summary
                .lease
                .as_ref()
                .is_some_and(|lease| lease.holder == holder);
            if !Self::is_resumable(&summary) && !ours {
                return Err(Error::SessionRewind {
                    session: session.name.clone(),
                    why: format!(
                        "turn {} (run {}) is being driven by another process; stop it first",
                        open.turn, open.run_id
                    ),
                });
            }
            if let Err(e) = self
                .cancel(&open.run_id, Some("undone".to_owned()), actor)
                .await
            {
                // The turn may have ended between the look and the cancel (a bot's own
                // turn finishing its answer): then there is nothing left to stop.
                if !self.summary(&open.run_id).await?.status.is_terminal() {
                    return Err(e);
                }
            }
            if ours {
                self.await_turn_end(session, open.turn, &open.run_id)
                    .await?;
            }
        }
        let line = self.session_line(session).await?;
        let Some(last) = line.last() else {
            return Err(Error::SessionRewind {
                session: session.name.clone(),
                why: "it has no turn to undo".to_owned(),
            });
        };
        let step = SessionStep {
            turn: last.turn,
            seq: 0,
        };
        self.rewind_session(session, step, actor, holder).await
    }

    /// Waits for a turn this process drives (a bot's turn task, just told to stop or just
    /// finishing) to end before the rewind turn is made.
    async fn await_turn_end(&self, session: &Session, turn: u32, run: &RunId) -> Result<()> {
        const POLL: std::time::Duration = std::time::Duration::from_millis(50);
        const PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);
        let started = std::time::Instant::now();
        loop {
            let summary = self.summary(run).await?;
            if summary.status.is_terminal() {
                return Ok(());
            }
            if started.elapsed() > PATIENCE {
                return Err(Error::SessionRewind {
                    session: session.name.clone(),
                    why: format!(
                        "turn {turn} (run {run}) did not stop within {}s; try again",
                        PATIENCE.as_secs()
                    ),
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Whether `step` is on the session's line and one its conversation can continue from.
    async fn check_step(&self, line: &Line, step: SessionStep) -> std::result::Result<(), String> {
        let on_line: Vec<String> = line.turns.iter().map(|t| t.turn.to_string()).collect();
        let Some(turn) = line.find(step.turn) else {
            return Err(format!(
                "turn {} is not on the session's line (a rewind left it behind, or it does not \
                 exist); its turns now are: {}",
                step.turn,
                if on_line.is_empty() {
                    "none".to_owned()
                } else {
                    on_line.join(", ")
                }
            ));
        };
        if step.seq == 0 {
            return Ok(());
        }
        if let Some(cut) = turn.cut
            && step.seq > cut
        {
            return Err(format!(
                "step {step} was left behind when the session went back to step {}.{cut}",
                step.turn
            ));
        }
        let state = self
            .fold_turn(line, turn)
            .await
            .map_err(|e| e.to_string())?;
        let quiet: Vec<u64> = state
            .quiet_targets()
            .into_iter()
            .filter(|s| turn.cut.is_none_or(|cut| *s <= cut))
            .collect();
        if quiet.contains(&step.seq) {
            return Ok(());
        }
        let near: Vec<String> = quiet
            .iter()
            .map(|s| TurnStart::step_name(step.turn, *s))
            .collect();
        Err(format!(
            "step {step} is not one the conversation can continue from (a tool call is pending \
             there, or it is not a step of turn {}); the steps of turn {} are {} (or {} for \
             before it began)",
            step.turn,
            step.turn,
            near.join(", "),
            step.turn
        ))
    }

    /// The checkpoint that holds the workspace as it was at `step`: the first one recorded
    /// after it, whichever turn took it. `None`: nothing changed the workspace since.
    async fn checkpoint_at(
        &self,
        session: &Session,
        step: SessionStep,
    ) -> std::result::Result<Option<String>, String> {
        let store = self.session_store().map_err(|e| e.to_string())?;
        let turns = store.turns(&session.id).await.map_err(|e| e.to_string())?;
        let unknown = |what: String| {
            format!(
                "{what} may have changed the workspace, and no checkpoint was taken before it \
                 (checkpoints are off for this session, or failed then), so the workspace as it \
                 was at step {step} is not known"
            )
        };
        for turn in turns.iter().filter(|t| t.turn >= step.turn) {
            let events = self
                .store()
                .read(&turn.run_id, 0)
                .await
                .map_err(|e| e.to_string())?;
            let start = events.first().and_then(|e| match &e.kind {
                EventKind::RunCreated(c) => c.start.clone(),
                _ => None,
            });
            if turn.turn > step.turn || step.seq == 0 {
                match start {
                    Some(TurnStart {
                        checkpoint: Some(id),
                        ..
                    }) => return Ok(Some(id)),
                    Some(TurnStart {
                        checkpoint: None,
                        rewound: Some(_),
                        ..
                    }) => return Err(unknown(format!("the rewind of turn {}", turn.turn))),
                    _ => {}
                }
            }
            let after = if turn.turn == step.turn { step.seq } else { 0 };
            let change = events.iter().find_map(|e| match &e.kind {
                EventKind::ToolStarted(s)
                    if e.seq > after
                        && matches!(s.tool.as_str(), "bash" | "write_file" | "edit_file") =>
                {
                    Some((e.seq, s.checkpoint.clone()))
                }
                _ => None,
            });
            match change {
                Some((_, Some(id))) => return Ok(Some(id)),
                Some((seq, None)) => {
                    return Err(unknown(format!(
                        "the call started at step {}.{seq}",
                        turn.turn
                    )));
                }
                None => {}
            }
        }
        Ok(None)
    }
}
