# Rewrites the usage lines at the top of a program's --help into the form help2man takes the SYNOPSIS
# from ("Usage: prog ..." and "  or: prog ..."): the programs print "usage:", put their other forms on
# indented lines and wrap long forms.
NR == 1 && /^usage: / {
  prog = $2
  line = "Usage:" substr($0, 7)
  in_usage = 1
  next
}
in_usage && $0 ~ ("^ +" prog "( |$)") {
  print line
  sub(/^ +/, "")
  line = "  or: " $0
  next
}
in_usage && /^ +[^ ]/ {
  sub(/^ +/, " ")
  line = line $0
  next
}
in_usage {
  print line
  in_usage = 0
}
{ print }
END { if (in_usage) print line }
