/* reader.h -- a hiredis reader for the fuzz targets that read replies.
 *
 * hiredis 0.14 allocates an array's element pointers as soon as it reads
 * the header: "*999999999" asks for 8 GB, which ASan refuses as a crash.
 * (The stores meet only what Redis sends; on Linux such a calloc fails
 * cleanly, to a reader error, or maps pages it never touches.) Larger
 * arrays than any reply the stores read, 4 integers for each of a batch's
 * 64 checks, are refused here as hiredis refuses what it cannot
 * allocate. */
#ifndef FG_FUZZ_READER_H
#define FG_FUZZ_READER_H

#include <hiredis/hiredis.h>

#define FUZZ_MAX_ELEMENTS 4096

static redisReplyObjectFunctions fuzz_capped;
static void *(*fuzz_create_array)(const redisReadTask *, int);

static void *fuzz_capped_array(const redisReadTask *task, int elements)
{
    return elements > FUZZ_MAX_ELEMENTS ? NULL
                                        : fuzz_create_array(task, elements);
}

/* A reader whose arrays are capped; NULL when out of memory. */
static redisReader *fuzz_reader(void)
{
    redisReader *rd = redisReaderCreate();
    if (!rd)
        return NULL;
    if (!fuzz_create_array) {
        fuzz_capped = *rd->fn;
        fuzz_create_array = fuzz_capped.createArray;
        fuzz_capped.createArray = fuzz_capped_array;
    }
    rd->fn = &fuzz_capped;
    return rd;
}

#endif
