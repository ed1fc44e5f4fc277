/* process.h -- the process a store belongs to. A store and its limiters
 * stay the process's that opened them: after fork() a child shares their
 * sockets with the parent (replies would cross), has none of their
 * threads, and holds a copy of their counts and leases. A child's calls
 * on them are refused (FG_EPROCESS). */
#ifndef FG_PROCESS_H
#define FG_PROCESS_H

/* The mark of the calling process, to keep with what it opens. */
unsigned fg__process_mark(void);
/* Nonzero when 'mark' is another process's (a parent's, before fork). */
int fg__process_other(unsigned mark);

#endif
