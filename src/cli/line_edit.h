/* A small line editor for the terminal chat (`llmr run MODEL`): one line read with the
 * terminal in raw mode, edited in place (left/right, Home/End, Backspace/Delete,
 * Ctrl-A/E/B/F/K/U/W, Ctrl-L), with the lines entered before recalled by the up and
 * down arrows.  The line is redrawn whole on every key, over as many rows as it takes
 * at the terminal's width; UTF-8 is kept whole and measured in columns (wide
 * characters count two).
 *
 * When the input is not a terminal, lines are read as they come, with no prompt and
 * no editing.  Owns the history (copies of the lines) and the terminal's mode while a
 * line is read: it is always put back before llmr_line_read returns. */
#ifndef LLMR_CLI_LINE_EDIT_H
#define LLMR_CLI_LINE_EDIT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct llmr_line_editor llmr_line_editor;

/* An editor reading in_fd, echoing to out_fd; NULL when out of memory. */
llmr_line_editor *llmr_line_editor_new(int in_fd, int out_fd);
void llmr_line_editor_free(llmr_line_editor *e);

/* Whether lines are edited (the input and the output are terminals). */
bool llmr_line_editor_interactive(const llmr_line_editor *e);

typedef enum llmr_line_result {
    LLMR_LINE_OK,          /* *line holds the line (malloc'd, no newline) */
    LLMR_LINE_INTERRUPTED, /* Ctrl-C: the line was dropped */
    LLMR_LINE_EOF,         /* Ctrl-D on an empty line, or the input ended */
    LLMR_LINE_ERROR        /* reading failed, or out of memory */
} llmr_line_result;

llmr_line_result llmr_line_read(llmr_line_editor *e, const char *prompt, char **line);

/* Adds a line to the history (not an empty one, nor the same as the last). */
void llmr_line_history_add(llmr_line_editor *e, const char *line);

#endif
