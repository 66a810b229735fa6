/* Small files of /proc and /sys, read whole (file.c). */
#ifndef ZC_FILE_H
#define ZC_FILE_H

/* The first line of the file at `path`, whole, without its newline, in
 * memory the caller frees; NULL if the file cannot be read or is empty. */
char *zc_file_first_line(const char *path);

#endif
