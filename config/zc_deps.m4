# Optional dependencies of libzcomm.
#
# Each --with-X[=DIR] follows one rule: "yes" or a DIR asks for X and a
# missing X is a configure error; no option means "check": use X if found,
# carry on without it if not; "no" turns X off.

# ZC_ARG_WITH(name, help)  -> sets zc_with_<name> to no, check, yes or a DIR
AC_DEFUN([ZC_ARG_WITH], [
  AC_ARG_WITH([$1], [AS_HELP_STRING([--with-$1@<:@=DIR@:>@], [$2])],
              [zc_with_$1=$withval], [zc_with_$1=check])
])

# ZC_DEP_MISSING(name, message): error if asked for, otherwise note it.
AC_DEFUN([ZC_DEP_MISSING], [
  AS_IF([test "x$zc_with_$1" != xcheck],
        [AC_MSG_ERROR([--with-$1 was given but $2])],
        [AC_MSG_NOTICE([$1 not found ($2); building without it])])
])

# ZC_DEP_DIR(name): the DIR given with --with-name=DIR, or empty.
AC_DEFUN([ZC_DEP_DIR], [`case "$zc_with_$1" in yes|no|check) ;; *) echo "$zc_with_$1" ;; esac`])

AC_DEFUN([ZC_CHECK_VERBS], [
  ZC_ARG_WITH([verbs], [use libibverbs for NIC port state and rate (default: if found)])
  zc_have_verbs=no
  AS_IF([test "x$zc_with_verbs" != xno], [
    zc_verbs_dir=ZC_DEP_DIR([verbs])
    zc_save_CPPFLAGS=$CPPFLAGS; zc_save_LIBS=$LIBS
    VERBS_CFLAGS=""; VERBS_LIBS="-libverbs"
    AS_IF([test -n "$zc_verbs_dir"],
          [VERBS_CFLAGS="-I$zc_verbs_dir/include"; VERBS_LIBS="-L$zc_verbs_dir/lib -libverbs"])
    CPPFLAGS="$CPPFLAGS $VERBS_CFLAGS"; LIBS="$VERBS_LIBS $LIBS"
    AC_CHECK_HEADER([infiniband/verbs.h],
      [AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <infiniband/verbs.h>]],
                                       [[int n; ibv_get_device_list(&n);]])],
                      [zc_have_verbs=yes])])
    CPPFLAGS=$zc_save_CPPFLAGS; LIBS=$zc_save_LIBS
    AS_IF([test "$zc_have_verbs" = no], [ZC_DEP_MISSING([verbs], [libibverbs was not found])])
  ])
  AS_IF([test "$zc_have_verbs" = yes],
        [AC_DEFINE([HAVE_VERBS], [1], [libibverbs is used])], [VERBS_CFLAGS=""; VERBS_LIBS=""])
  AC_SUBST([VERBS_CFLAGS])
  AC_SUBST([VERBS_LIBS])
  AM_CONDITIONAL([HAVE_VERBS], [test "$zc_have_verbs" = yes])
])

AC_DEFUN([ZC_CHECK_CUDA], [
  ZC_ARG_WITH([cuda], [build the CUDA path from DIR (default: /usr/local/cuda if found)])
  AC_ARG_WITH([nvcc-gencode],
    [AS_HELP_STRING([--with-nvcc-gencode=FLAGS],
                    [nvcc -gencode flags (default: sm_80 and sm_90 code, compute_90 PTX)])],
    [NVCC_GENCODE=$withval],
    dnl SASS runs only on its own major architecture: without PTX every
    dnl launch on a newer GPU (sm_100, sm_120) fails with "no kernel image".
    dnl compute_90 PTX is JIT-compiled there by the driver.
    [NVCC_GENCODE="-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90"])
  zc_have_cuda=no
  zc_cuda_home=""
  AS_IF([test "x$zc_with_cuda" != xno], [
    zc_cuda_home=ZC_DEP_DIR([cuda])
    AS_IF([test -z "$zc_cuda_home"], [zc_cuda_home=/usr/local/cuda])
    zc_save_CPPFLAGS=$CPPFLAGS; zc_save_LIBS=$LIBS; zc_save_LDFLAGS=$LDFLAGS
    CUDA_CFLAGS="-I$zc_cuda_home/include"
    CUDA_LIBS="-L$zc_cuda_home/lib64 -Wl,-rpath,$zc_cuda_home/lib64 -lcudart"
    CPPFLAGS="$CPPFLAGS $CUDA_CFLAGS"; LIBS="$CUDA_LIBS $LIBS"
    AC_PATH_PROG([NVCC], [nvcc], [], [$zc_cuda_home/bin])
    AS_IF([test -n "$NVCC"],
      [AC_CHECK_HEADER([cuda_runtime.h],
        [AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cuda_runtime.h>]],
                                         [[int n; cudaGetDeviceCount(&n);]])],
                        [zc_have_cuda=yes])])])
    CPPFLAGS=$zc_save_CPPFLAGS; LIBS=$zc_save_LIBS; LDFLAGS=$zc_save_LDFLAGS
    AS_IF([test "$zc_have_cuda" = no],
          [ZC_DEP_MISSING([cuda], [nvcc and the CUDA runtime were not found in $zc_cuda_home])
           zc_cuda_home=""])
  ])
  AS_IF([test "$zc_have_cuda" = yes],
        [AC_DEFINE([HAVE_CUDA], [1], [the CUDA path is built])], [CUDA_CFLAGS=""; CUDA_LIBS=""])
  AC_SUBST([CUDA_CFLAGS])
  AC_SUBST([CUDA_LIBS])
  AC_SUBST([NVCC_GENCODE])
  AM_CONDITIONAL([HAVE_CUDA], [test "$zc_have_cuda" = yes])
])

# ZC_CHECK_CUDA_LIB(name, header, lib, function call, DEFINE)
AC_DEFUN([ZC_CHECK_CUDA_LIB], [
  ZC_ARG_WITH([$1], [use $1 from DIR (default: the CUDA directory, if found; needs CUDA)])
  zc_have_$1=no
  AS_IF([test "x$zc_with_$1" != xno], [
    AS_IF([test "$zc_have_cuda" != yes],
      [ZC_DEP_MISSING([$1], [it needs the CUDA path, which is off])],
      [zc_dep_dir=ZC_DEP_DIR([$1])
       AS_IF([test -z "$zc_dep_dir"], [zc_dep_dir=$zc_cuda_home])
       zc_save_CPPFLAGS=$CPPFLAGS; zc_save_LIBS=$LIBS
       $5_CFLAGS="-I$zc_dep_dir/include $CUDA_CFLAGS"
       $5_LIBS="-L$zc_dep_dir/lib64 -L$zc_dep_dir/lib -Wl,-rpath,$zc_dep_dir/lib64 -l$3 $CUDA_LIBS"
       CPPFLAGS="$CPPFLAGS $$5_CFLAGS"; LIBS="$$5_LIBS $LIBS"
       AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <$2>]], [[$4]])], [zc_have_$1=yes])
       CPPFLAGS=$zc_save_CPPFLAGS; LIBS=$zc_save_LIBS
       AS_IF([test "$zc_have_$1" = no], [ZC_DEP_MISSING([$1], [$2 or -l$3 was not found in $zc_dep_dir])])])
  ])
  AS_IF([test "$zc_have_$1" = yes],
        [AC_DEFINE([HAVE_$5], [1], [$1 is used])], [$5_CFLAGS=""; $5_LIBS=""])
  AC_SUBST([$5_CFLAGS])
  AC_SUBST([$5_LIBS])
  AM_CONDITIONAL([HAVE_$5], [test "$zc_have_$1" = yes])
])

AC_DEFUN([ZC_CHECK_NCCL],
  [ZC_CHECK_CUDA_LIB([nccl], [nccl.h], [nccl], [int v; ncclGetVersion(&v);], [NCCL])])
AC_DEFUN([ZC_CHECK_CUDNN],
  [ZC_CHECK_CUDA_LIB([cudnn], [cudnn.h], [cudnn], [size_t v = cudnnGetVersion(); (void)v;], [CUDNN])])

AC_DEFUN([ZC_CHECK_MPI], [
  ZC_ARG_WITH([mpi], [build MPI bootstrap for the benchmarks with DIR/bin/mpicc (default: if found)])
  zc_have_mpi=no
  AS_IF([test "x$zc_with_mpi" != xno], [
    zc_mpi_dir=ZC_DEP_DIR([mpi])
    AS_IF([test -n "$zc_mpi_dir"],
          [AC_PATH_PROG([MPICC], [mpicc], [], [$zc_mpi_dir/bin])],
          [AC_PATH_PROG([MPICC], [mpicc])])
    AS_IF([test -n "$MPICC"], [
      MPI_CFLAGS=`$MPICC --showme:compile 2>/dev/null`
      MPI_LIBS=`$MPICC --showme:link 2>/dev/null`
      AS_IF([test -z "$MPI_LIBS"], [MPI_LIBS="-lmpi"])
      zc_save_CPPFLAGS=$CPPFLAGS; zc_save_LIBS=$LIBS
      CPPFLAGS="$CPPFLAGS $MPI_CFLAGS"; LIBS="$MPI_LIBS $LIBS"
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]], [[MPI_Init(0, 0);]])], [zc_have_mpi=yes])
      CPPFLAGS=$zc_save_CPPFLAGS; LIBS=$zc_save_LIBS])
    AS_IF([test "$zc_have_mpi" = no], [ZC_DEP_MISSING([mpi], [mpicc was not found or does not link])])
  ])
  AS_IF([test "$zc_have_mpi" = yes],
        [AC_DEFINE([HAVE_MPI], [1], [benchmarks can bootstrap through MPI])], [MPI_CFLAGS=""; MPI_LIBS=""])
  AC_SUBST([MPI_CFLAGS])
  AC_SUBST([MPI_LIBS])
  AM_CONDITIONAL([HAVE_MPI], [test "$zc_have_mpi" = yes])
])

# GLPK: the reference LP solver for the remap solver's tests and benchmark
# only; the library never links it.
AC_DEFUN([ZC_CHECK_GLPK], [
  ZC_ARG_WITH([glpk], [check the remap solver against GLPK in tests (default: if found)])
  zc_have_glpk=no
  AS_IF([test "x$zc_with_glpk" != xno], [
    zc_glpk_dir=ZC_DEP_DIR([glpk])
    GLPK_CFLAGS=""; GLPK_LIBS="-lglpk"
    AS_IF([test -n "$zc_glpk_dir"],
          [GLPK_CFLAGS="-I$zc_glpk_dir/include"; GLPK_LIBS="-L$zc_glpk_dir/lib -lglpk"])
    zc_save_CPPFLAGS=$CPPFLAGS; zc_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $GLPK_CFLAGS"; LIBS="$GLPK_LIBS $LIBS"
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <glpk.h>]], [[glp_prob *p = glp_create_prob(); glp_delete_prob(p);]])],
                   [zc_have_glpk=yes])
    CPPFLAGS=$zc_save_CPPFLAGS; LIBS=$zc_save_LIBS
    AS_IF([test "$zc_have_glpk" = no], [ZC_DEP_MISSING([glpk], [glpk.h or -lglpk was not found])])
  ])
  AS_IF([test "$zc_have_glpk" = yes],
        [AC_DEFINE([HAVE_GLPK], [1], [GLPK is available to tests])], [GLPK_CFLAGS=""; GLPK_LIBS=""])
  AC_SUBST([GLPK_CFLAGS])
  AC_SUBST([GLPK_LIBS])
  AM_CONDITIONAL([HAVE_GLPK], [test "$zc_have_glpk" = yes])
])
