use strict; use lib 'lib', 'shim'; use Sisimai; use JSON::PP;
my $js = JSON::PP->new->canonical;
for my $f (@ARGV) { my $v = Sisimai->rise($f) || next;
  for my $e (@$v) { my $d = $e->damn; print $js->encode({file => $f, reason => $d->{reason}, diagnosticcode => $d->{diagnosticcode}, deliverystatus => $d->{deliverystatus}, replycode => $d->{replycode}, diagnostictype => $d->{diagnostictype}, smtpcommand=>$d->{command}, lhost=>$d->{decodedby}, rhost=>$d->{rhost}}), "\n" } }
