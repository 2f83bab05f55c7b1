//! Bringing a run's container up: find it by name, and attach to it if it runs; otherwise
//! (gone, stopped, never made) remove what is left and create, attach and start a fresh one
//! around the same workspace. Attaching before starting means nothing the helper writes is
//! missed. A name taken in the meantime (another process of the same run) is resolved by
//! looking again.

use bollard::Docker;
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, InspectContainerOptions,
    RemoveContainerOptionsBuilder, StartContainerOptions,
};

use crate::error::{Error, Result, is_conflict, is_not_found};
use crate::session::Session;
use crate::spec::{ContainerSpec, container_body};

/// How often to retry when the name is taken by a container that then vanished.
const ATTEMPTS: usize = 3;

/// Returns a session with the running container called `name`, creating it from `spec` if
/// it is not running.
pub(crate) async fn bring_up(
    docker: &Docker,
    name: &str,
    spec: &ContainerSpec<'_>,
    default_image: &str,
) -> Result<Session> {
    let mut last = None;
    for _ in 0..ATTEMPTS {
        match inspect(docker, name).await? {
            Some((id, true)) => return attach(docker, &id).await,
            Some((id, false)) => {
                tracing::info!(container = %id, "the run's container is not running; recreating it");
                remove(docker, &id).await?;
            }
            None => {}
        }
        // The image is not inspected first (`open` did, and a start should not pay an
        // Engine round trip for it again): a create that finds no image says so with 404,
        // and only then is the image looked at, to name the command that makes it.
        let options = CreateContainerOptionsBuilder::new().name(name).build();
        let created = match docker
            .create_container(Some(options), container_body(spec))
            .await
        {
            Ok(created) => created,
            Err(err) if is_conflict(&err) => {
                last = Some(err);
                continue;
            }
            Err(err) if is_not_found(&err) => {
                check_image(docker, spec.image, default_image).await?;
                return Err(Error::docker(format!("create the container `{name}`"), err));
            }
            Err(err) => return Err(Error::docker(format!("create the container `{name}`"), err)),
        };
        for warning in &created.warnings {
            tracing::warn!(container = %created.id, "docker: {warning}");
        }
        let session = attach(docker, &created.id).await?;
        docker
            .start_container(&created.id, None::<StartContainerOptions>)
            .await
            .map_err(|e| Error::docker(format!("start the container `{name}`"), e))?;
        tracing::info!(container = %created.id, %name, image = spec.image, "sandbox container started");
        return Ok(session);
    }
    Err(match last {
        Some(err) => Error::docker(format!("create the container `{name}`"), err),
        None => Error::Helper {
            container: name.to_owned(),
            why: "kept vanishing while being created".to_owned(),
        },
    })
}

/// The id of the container called `name` and whether it runs, or `None` if there is none.
pub(crate) async fn inspect(docker: &Docker, name: &str) -> Result<Option<(String, bool)>> {
    match docker
        .inspect_container(name, None::<InspectContainerOptions>)
        .await
    {
        Ok(info) => {
            let running = info.state.as_ref().and_then(|s| s.running).unwrap_or(false);
            Ok(Some((info.id.unwrap_or_else(|| name.to_owned()), running)))
        }
        Err(err) if is_not_found(&err) => Ok(None),
        Err(err) => Err(Error::docker(
            format!("inspect the container `{name}`"),
            err,
        )),
    }
}

/// Removes a container (and its anonymous volumes; never a bind-mounted workspace).
/// Returns whether there was one.
pub(crate) async fn remove(docker: &Docker, id: &str) -> Result<bool> {
    let options = RemoveContainerOptionsBuilder::new()
        .force(true)
        .v(true)
        .build();
    match docker.remove_container(id, Some(options)).await {
        Ok(()) => Ok(true),
        Err(err) if is_not_found(&err) => Ok(false),
        // Already being removed (by the reaper, by `docker rm`): as good as gone.
        Err(err) if is_conflict(&err) => Ok(true),
        Err(err) => Err(Error::docker(format!("remove the container `{id}`"), err)),
    }
}

/// Fails with the command that builds or pulls `image` if the daemon does not have it
/// (for the backend's default image, the script that builds it).
pub(crate) async fn check_image(docker: &Docker, image: &str, default_image: &str) -> Result<()> {
    if image_present(docker, image).await? {
        Ok(())
    } else if image == default_image {
        Err(Error::DefaultImageMissing {
            image: image.to_owned(),
        })
    } else {
        Err(Error::ImageMissing {
            image: image.to_owned(),
        })
    }
}

/// Whether the daemon has `image`.
pub(crate) async fn image_present(docker: &Docker, image: &str) -> Result<bool> {
    match docker.inspect_image(image).await {
        Ok(_) => Ok(true),
        Err(err) if is_not_found(&err) => Ok(false),
        Err(err) => Err(Error::docker(format!("inspect the image `{image}`"), err)),
    }
}

async fn attach(docker: &Docker, id: &str) -> Result<Session> {
    // No detach keys can occur in the input: JSON escapes every control character.
    let options = AttachContainerOptionsBuilder::new()
        .stream(true)
        .stdin(true)
        .stdout(true)
        .stderr(true)
        .logs(false)
        .build();
    let attached = docker
        .attach_container(id, Some(options))
        .await
        .map_err(|e| Error::docker(format!("attach to the container `{id}`"), e))?;
    Ok(Session::new(id.to_owned(), attached))
}
