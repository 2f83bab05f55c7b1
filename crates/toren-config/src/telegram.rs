//! The Telegram bot's settings: its token (a runtime credential held as a
//! [`Secret`]), the Bot API's address, who may talk to it, the group chats it answers in,
//! and the agent of new chats. Read from the same lookup as [`Settings`](crate::Settings);
//! a malformed list or URL is an error naming the variable.

use crate::env_vars::EnvVar;
use crate::{Error, Result, Secret};

pub const TELEGRAM_BOT_TOKEN: EnvVar = EnvVar {
    name: "TELEGRAM_BOT_TOKEN",
    default: None,
    description: "The Telegram bot's token (from @BotFather). With it `toren telegram` runs the \
                  bot, and `toren serve` runs it too unless `--no-telegram`. A runtime \
                  credential: never granted to a sandbox, never logged.",
    secret: true,
};

pub const TELEGRAM_API_URL: EnvVar = EnvVar {
    name: "TELEGRAM_API_URL",
    default: Some("https://api.telegram.org"),
    description: "The Telegram Bot API's base URL (a local Bot API server's, or a test's).",
    secret: false,
};

pub const TOREN_TELEGRAM_USERS: EnvVar = EnvVar {
    name: "TOREN_TELEGRAM_USERS",
    default: None,
    description: "The Telegram user ids that may talk to the bot, comma-separated; anyone else \
                  gets one refusal that names their id.",
    secret: false,
};

pub const TOREN_TELEGRAM_GROUPS: EnvVar = EnvVar {
    name: "TOREN_TELEGRAM_GROUPS",
    default: None,
    description: "The group chat ids the bot answers in, comma-separated (others are refused); \
                  in them, too, only TOREN_TELEGRAM_USERS are heard.",
    secret: false,
};

pub const TOREN_TELEGRAM_AGENT: EnvVar = EnvVar {
    name: "TOREN_TELEGRAM_AGENT",
    default: Some("default"),
    description: "The agent (in TOREN_AGENTS) of a Telegram chat's session; `/agent NAME` picks \
                  another for that chat.",
    secret: false,
};

/// The bot's resolved settings.
#[derive(Clone, Debug)]
pub struct TelegramSettings {
    /// `None`: no bot.
    pub token: Option<Secret>,
    pub api_url: String,
    pub users: Vec<i64>,
    pub groups: Vec<i64>,
    pub agent: String,
}

impl TelegramSettings {
    /// Resolves the settings from `lookup` (empty values count as unset).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let read = |var: &EnvVar| lookup(var.name).filter(|v| !v.trim().is_empty());
        let token = read(&TELEGRAM_BOT_TOKEN).map(|t| Secret::new(t.trim()));
        if let Some(token) = &token {
            let shaped = token.expose().split_once(':').is_some_and(|(id, rest)| {
                !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) && !rest.is_empty()
            });
            if !shaped {
                return Err(invalid(
                    &TELEGRAM_BOT_TOKEN,
                    "(hidden)",
                    "a bot token looks like `123456789:AA…` (from @BotFather)",
                ));
            }
        }
        let api_url =
            read(&TELEGRAM_API_URL).unwrap_or_else(|| "https://api.telegram.org".to_owned());
        if !(api_url.starts_with("https://") || api_url.starts_with("http://")) {
            return Err(invalid(&TELEGRAM_API_URL, &api_url, "an http(s):// URL"));
        }
        Ok(Self {
            token,
            api_url: api_url.trim_end_matches('/').to_owned(),
            users: ids(&TOREN_TELEGRAM_USERS, read(&TOREN_TELEGRAM_USERS))?,
            groups: ids(&TOREN_TELEGRAM_GROUPS, read(&TOREN_TELEGRAM_GROUPS))?,
            agent: read(&TOREN_TELEGRAM_AGENT).unwrap_or_else(|| "default".to_owned()),
        })
    }
}

fn invalid(var: &EnvVar, value: &str, expected: &str) -> Error {
    Error::InvalidSetting {
        var: var.name,
        value: value.to_owned(),
        expected: expected.to_owned(),
    }
}

fn ids(var: &EnvVar, value: Option<String>) -> Result<Vec<i64>> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<i64>().map_err(|_| {
                invalid(
                    var,
                    &value,
                    "Telegram ids (whole numbers) separated by commas",
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(vars: &[(&str, &str)]) -> Result<TelegramSettings> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        TelegramSettings::from_lookup(|name| {
            vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn defaults_and_lists() {
        let none = from(&[]).unwrap();
        assert!(none.token.is_none());
        assert_eq!(none.api_url, "https://api.telegram.org");
        assert_eq!(none.agent, "default");
        let set = from(&[
            ("TELEGRAM_BOT_TOKEN", "123:abc"),
            ("TELEGRAM_API_URL", "http://127.0.0.1:9/"),
            ("TOREN_TELEGRAM_USERS", "1, 22,333"),
            ("TOREN_TELEGRAM_GROUPS", "-100200"),
            ("TOREN_TELEGRAM_AGENT", "helper"),
        ])
        .unwrap();
        assert_eq!(set.token.as_ref().map(Secret::expose), Some("123:abc"));
        assert_eq!(set.api_url, "http://127.0.0.1:9");
        assert_eq!(set.users, [1, 22, 333]);
        assert_eq!(set.groups, [-100_200]);
        assert_eq!(set.agent, "helper");
        assert!(!format!("{set:?}").contains("abc"), "the token is hidden");
    }

    #[test]
    fn bad_values_name_the_variable_and_never_show_the_token() {
        let bad = from(&[("TOREN_TELEGRAM_USERS", "1,bob")]).unwrap_err();
        assert!(bad.to_string().contains("TOREN_TELEGRAM_USERS"), "{bad}");
        let bad = from(&[("TELEGRAM_BOT_TOKEN", "not-a-token-secret")]).unwrap_err();
        assert!(bad.to_string().contains("TELEGRAM_BOT_TOKEN"), "{bad}");
        assert!(!bad.to_string().contains("secret"), "{bad}");
        let bad = from(&[("TELEGRAM_API_URL", "ftp://x")]).unwrap_err();
        assert!(bad.to_string().contains("TELEGRAM_API_URL"), "{bad}");
    }
}
