//! The [`Channel`] trait every channel implements, and how a worker finds a run's channel
//! from its binding: a [`ChannelFactory`] ([`NoChannels`] by default, [`Channels`] to serve
//! several kinds from one process).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use toren_protocol::{ChannelBinding, RunId};

use crate::{ChannelError, Delivered, Delivery};

/// A way to hand the person a file: the terminal (a downloads directory), later Telegram
/// (a photo for an image, a document otherwise).
#[async_trait]
pub trait Channel: fmt::Debug + Send + Sync {
    /// The channel's kind, as bindings name it: `terminal`, `telegram`.
    fn name(&self) -> &str;

    /// Hands `delivery` to the person. A channel that has already delivered the same run's
    /// call ([`Delivery::call_id`], an idempotency key) answers with that delivery, marked
    /// [`Delivered::repeated`], instead of delivering again.
    async fn deliver(&self, delivery: &Delivery) -> Result<Delivered, ChannelError>;
}

/// Finds the channel a run is bound to.
pub trait ChannelFactory: Send + Sync {
    /// The channel for `run`, bound to `binding`.
    fn channel(
        &self,
        run: &RunId,
        binding: &ChannelBinding,
    ) -> Result<Arc<dyn Channel>, ChannelError>;
}

/// A process without channels: every bound run is refused (unbound runs need none).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoChannels;

impl ChannelFactory for NoChannels {
    fn channel(
        &self,
        _run: &RunId,
        binding: &ChannelBinding,
    ) -> Result<Arc<dyn Channel>, ChannelError> {
        Err(ChannelError::Unavailable {
            kind: binding.kind.clone(),
        })
    }
}

/// One factory per kind of channel, chosen by the binding's `kind`.
#[derive(Clone, Default)]
pub struct Channels {
    kinds: BTreeMap<String, Arc<dyn ChannelFactory>>,
}

impl Channels {
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves bindings of `kind` with `factory` (replacing an earlier one for that kind).
    pub fn with(mut self, kind: impl Into<String>, factory: Arc<dyn ChannelFactory>) -> Self {
        self.kinds.insert(kind.into(), factory);
        self
    }
}

impl fmt::Debug for Channels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.kinds.keys()).finish()
    }
}

impl ChannelFactory for Channels {
    fn channel(
        &self,
        run: &RunId,
        binding: &ChannelBinding,
    ) -> Result<Arc<dyn Channel>, ChannelError> {
        match self.kinds.get(&binding.kind) {
            Some(factory) => factory.channel(run, binding),
            None => NoChannels.channel(run, binding),
        }
    }
}
