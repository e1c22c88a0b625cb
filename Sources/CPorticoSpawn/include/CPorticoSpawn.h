#ifndef CPORTICO_SPAWN_H
#define CPORTICO_SPAWN_H

#include <spawn.h>

/// glibc's GNU extensions that `ChildProcess` needs. Swift's Glibc module is built without
/// _GNU_SOURCE, so it hides them; `CPorticoSpawn.c` is compiled with it and passes them on.

/// pipe2(fds, O_CLOEXEC): both ends close-on-exec from the start, so a child that another thread
/// spawns meanwhile cannot inherit them.
int cportico_pipe_cloexec(int descriptors[2]);

/// posix_spawn_file_actions_addclosefrom_np (glibc 2.34): the child closes every descriptor from
/// `from` up, without the parent listing them.
int cportico_spawn_file_actions_addclosefrom(posix_spawn_file_actions_t *actions, int from);

#endif
