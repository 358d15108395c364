// SPDX-License-Identifier: Apache-2.0
// The floor of a results-cache hit on a directory: list every directory below ROOT and stat
// every entry that is not a directory (what a hit must look at to know nothing changed), on
// THREADS threads sharing one stack of directories. Nothing else: no paths sorted, no cache
// read. Prints the counts, so that a run can be checked against `find`.
//   cc -O2 -pthread walk_floor.c -o walk_floor && ./walk_floor ROOT [THREADS]
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char** stack;
static size_t depth, room;
static unsigned busy;
static unsigned long long files, dirs;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t more = PTHREAD_COND_INITIALIZER;

static void push(char* path) {
  if (depth == room) {
    room = room ? room * 2 : 1024;
    stack = realloc(stack, room * sizeof *stack);
    if (!stack) abort();
  }
  stack[depth++] = path;
}

static void* work(void* unused) {
  (void)unused;
  unsigned long long my_files = 0, my_dirs = 0;
  pthread_mutex_lock(&lock);
  for (;;) {
    while (depth == 0 && busy != 0) pthread_cond_wait(&more, &lock);
    if (depth == 0) break;
    char* dir = stack[--depth];
    ++busy;
    pthread_mutex_unlock(&lock);
    char* found[4096];
    size_t nfound = 0;
    DIR* d = opendir(dir);
    if (d) {
      struct dirent* e;
      while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        int is_dir = e->d_type == DT_DIR;
        if (!is_dir) {
          struct stat st;
          if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) is_dir = S_ISDIR(st.st_mode);
          ++my_files;
        }
        if (is_dir) {
          char* sub = malloc(strlen(dir) + strlen(e->d_name) + 2);
          sprintf(sub, "%s/%s", dir, e->d_name);
          if (nfound == sizeof found / sizeof *found) {
            pthread_mutex_lock(&lock);
            for (size_t i = 0; i < nfound; ++i) push(found[i]);
            pthread_cond_broadcast(&more);
            pthread_mutex_unlock(&lock);
            nfound = 0;
          }
          found[nfound++] = sub;
          ++my_dirs;
        }
      }
      closedir(d);
    }
    free(dir);
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nfound; ++i) push(found[i]);
    --busy;
    if (nfound > 1 || (busy == 0 && depth == 0)) pthread_cond_broadcast(&more);
    else if (nfound == 1) pthread_cond_signal(&more);
  }
  files += my_files;
  dirs += my_dirs;
  pthread_mutex_unlock(&lock);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s ROOT [THREADS]\n", argv[0]);
    return 2;
  }
  unsigned threads = argc > 2 ? (unsigned)atoi(argv[2]) : 1;
  if (threads < 1) threads = 1;
  push(strdup(argv[1]));
  pthread_t* pool = calloc(threads, sizeof *pool);
  for (unsigned t = 1; t < threads; ++t) pthread_create(&pool[t], NULL, work, NULL);
  work(NULL);
  for (unsigned t = 1; t < threads; ++t) pthread_join(pool[t], NULL);
  printf("%llu entries stat'ed, %llu directories, %u threads\n", files, dirs, threads);
  return 0;
}
