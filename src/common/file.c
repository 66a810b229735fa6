/* Small files of /proc and /sys (the boot id, cgroup lists, the huge page
 * size): their first line, read whole, however long. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/file.h"

char *zc_file_first_line(const char *path)
{
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;

    if (!f)
        return NULL;
    if (getline(&line, &cap, f) < 0) {
        free(line);
        line = NULL;
    } else {
        line[strcspn(line, "\n")] = '\0';
    }
    fclose(f);
    return line;
}
