/* GLPK formulation of the remap LP: variables M_ij (sender i, receiver j)
 * and C; minimise C subject to row sums = surplus, column sums = deficit,
 * sum_j T_ij M_ij <= C per sender and sum_i T_ij M_ij <= C per receiver. */
#include "config.h"

#include <stdlib.h>

#include "zc_plan_lp_reference.h"

#ifdef HAVE_GLPK
#include <glpk.h>

int zc_lp_remap(int d, int ppn, const int64_t *before, const int64_t *after, double b_intra,
                double b_inter, int integral, double *objective)
{
    int *snd = malloc((size_t)d * sizeof(int)), *rcv = malloc((size_t)d * sizeof(int));
    int ns = 0, nr = 0, rc = -1;
    glp_prob *lp = NULL;
    int *ia = NULL, *ja = NULL;
    double *ar = NULL;

    if (!snd || !rcv)
        goto out;
    for (int i = 0; i < d; i++) {
        if (before[i] > after[i])
            snd[ns++] = i;
        else if (before[i] < after[i])
            rcv[nr++] = i;
    }
    if (ns == 0) {
        *objective = 0;
        rc = 0;
        goto out;
    }
    {
        int nvar = ns * nr + 1, nrow = 2 * (ns + nr), nz = 4 * ns * nr + (ns + nr), k = 0;
        glp_smcp smcp;

        lp = glp_create_prob();
        glp_set_obj_dir(lp, GLP_MIN);
        glp_add_rows(lp, nrow);
        glp_add_cols(lp, nvar);
        ia = malloc(((size_t)nz + 1) * sizeof(int));
        ja = malloc(((size_t)nz + 1) * sizeof(int));
        ar = malloc(((size_t)nz + 1) * sizeof(double));
        if (!ia || !ja || !ar)
            goto out;
        for (int a = 0; a < ns; a++) {
            double w = (double)(before[snd[a]] - after[snd[a]]);

            glp_set_row_bnds(lp, 1 + a, GLP_FX, w, w);      /* row sums */
            glp_set_row_bnds(lp, 1 + ns + nr + a, GLP_UP, 0, 0); /* send cost - C */
        }
        for (int b = 0; b < nr; b++) {
            double w = (double)(after[rcv[b]] - before[rcv[b]]);

            glp_set_row_bnds(lp, 1 + ns + b, GLP_FX, w, w);
            glp_set_row_bnds(lp, 1 + 2 * ns + nr + b, GLP_UP, 0, 0);
        }
        for (int a = 0; a < ns; a++)
            for (int b = 0; b < nr; b++) {
                int col = 1 + a * nr + b;
                double t = snd[a] / ppn == rcv[b] / ppn ? b_intra : b_inter;

                glp_set_col_bnds(lp, col, GLP_LO, 0, 0);
                if (integral)
                    glp_set_col_kind(lp, col, GLP_IV);
                ia[++k] = 1 + a, ja[k] = col, ar[k] = 1;
                ia[++k] = 1 + ns + b, ja[k] = col, ar[k] = 1;
                ia[++k] = 1 + ns + nr + a, ja[k] = col, ar[k] = t;
                ia[++k] = 1 + 2 * ns + nr + b, ja[k] = col, ar[k] = t;
            }
        glp_set_col_bnds(lp, nvar, GLP_LO, 0, 0);
        glp_set_obj_coef(lp, nvar, 1);
        for (int r = 0; r < ns + nr; r++)
            ia[++k] = 1 + ns + nr + r, ja[k] = nvar, ar[k] = -1;
        glp_load_matrix(lp, k, ia, ja, ar);
        glp_init_smcp(&smcp);
        smcp.msg_lev = GLP_MSG_OFF;
        smcp.presolve = GLP_ON;
        smcp.tm_lim = 120000; /* the benchmark reports a time-out as such */
        if (glp_simplex(lp, &smcp) != 0 || glp_get_status(lp) != GLP_OPT)
            goto out;
        *objective = glp_get_obj_val(lp);
        if (integral) {
            glp_iocp iocp;

            glp_init_iocp(&iocp);
            iocp.msg_lev = GLP_MSG_OFF;
            iocp.tm_lim = 2000; /* branch and bound can stall on symmetric instances */
            if (glp_intopt(lp, &iocp) != 0 || glp_mip_status(lp) != GLP_OPT)
                goto out;
            *objective = glp_mip_obj_val(lp);
        }
        rc = 0;
    }
out:
    if (lp)
        glp_delete_prob(lp);
    free(ia);
    free(ja);
    free(ar);
    free(snd);
    free(rcv);
    return rc;
}
#else
int zc_lp_remap(int d, int ppn, const int64_t *before, const int64_t *after, double b_intra,
                double b_inter, int integral, double *objective)
{
    (void)d, (void)ppn, (void)before, (void)after, (void)b_intra, (void)b_inter;
    (void)integral, (void)objective;
    return -1;
}
#endif
